"""`cairn bench memindex --part sizes` times copies of recall's vector statements (the CLI does not depend on the
service): they must be the statements recall runs, or the benchmark measures something else."""

from cairn.cli import bench_agent_sizes as bench
from cairn.recall import memory_queries


def test_the_benchmarks_statements_are_recalls() -> None:
    assert bench.FILTER == memory_queries._FILTER
    assert bench.EXACT_VECTOR == memory_queries.EXACT_VECTOR
    assert memory_queries.ANN_VECTOR[512] == bench.ANN_VECTOR_512
    assert bench.SET_ANN == memory_queries.SET_ANN
    for chunks, rows in ((1, 1), (2_000, 100_000), (50_000, 60_000), (10**6, 10**7)):
        assert bench.ann_settings(24, chunks, rows) == memory_queries.ann_settings(24, chunks, rows)


def test_the_wide_rows_scan_is_the_same_statement_over_memory_chunks() -> None:
    assert "indexer.memory_chunk_vectors" not in bench.WIDE_EXACT_VECTOR
    assert bench.WIDE_EXACT_VECTOR.replace("memory_chunks", "memory_chunk_vectors") == memory_queries.EXACT_VECTOR
