"""`cairn reindex`'s choices: everything, every document in place, or only the trusted ones."""

import pytest

from cairn.cli.main import _parser


def test_reindex_takes_documents_or_trusted_but_not_both() -> None:
    parser = _parser()
    plain = parser.parse_args(["reindex"])
    assert (plain.documents, plain.trusted) == (False, False)
    assert parser.parse_args(["reindex", "--documents", "--tenant", "t"]).documents is True
    assert parser.parse_args(["reindex", "--trusted"]).trusted is True
    with pytest.raises(SystemExit):
        parser.parse_args(["reindex", "--documents", "--trusted"])


def test_the_retrieval_bench_has_a_notes_mode_with_other_questions() -> None:
    args = _parser().parse_args(
        ["bench", "retrieval", "--data", "d", "--out", "o", "--mode", "notes", "--questions", "q.jsonl"]
    )
    assert (args.mode, str(args.questions)) == ("notes", "q.jsonl")
