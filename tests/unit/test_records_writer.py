"""The record writer against in-memory twins of its ports (documents, records, embedder): what a record request
does to the records and to the bank file, version by version, and how a person's edit of the bank reads back."""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from cairn.consolidation.domain import DocumentWrite
from cairn.consolidation.records import Neighbour
from cairn.consolidation.records_handlers import explicit_requests, on_memory_write, on_record_requested
from cairn.consolidation.records_store import BankRow, NewRecord
from cairn.consolidation.records_writer import Writer
from cairn.consolidation.store import StaleDocumentError
from cairn.events import MemoryWriteRequested, RecordRequested, TranscriptAppended
from cairn.memindex.embeddings import Vectors
from tests.unit.test_consolidation_domain import InMemoryStore

TENANT = "0b5e8f9a-3c1d-4e2f-8a6b-7c9d0e1f2a3b"
SID = "5f0c2d3e-4b5a-4c6d-9e8f-0a1b2c3d4e5f"
NOW = datetime(2026, 12, 6, 9, 30, tzinfo=UTC)


class AxisEmbedder:
    """Texts on chosen unit vectors, so a test sets each cosine; an unknown text gets an axis of its own."""

    provider, model, dimensions = "test", "axes", 8

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = {text: np.array(v, dtype=np.float32) / np.linalg.norm(v) for text, v in vectors.items()}

    async def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [self.vectors.get(t, np.eye(8, dtype=np.float32)[7 - len(self.vectors) % 4]) for t in texts]
        return np.stack(rows).astype(np.float32)


class InMemoryRecords:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    async def neighbours(
        self, tenant: str, agent: str, entity: str, vector: Sequence[float] | None, model: str | None
    ) -> list[Neighbour]:
        def cosine(row: dict[str, Any]) -> float | None:
            return None if vector is None else float(np.dot(row["vector"], vector))

        return [
            Neighbour(
                r["record_id"], r["kind"], r["entity"], r["relation"], r["hash"], r["valid_from"], cosine(r), r["text"]
            )
            for r in self.rows.values()
            if r["entity"] == entity and r["retired_at"] is None
        ]

    async def insert(self, tenant: str, record: NewRecord) -> None:
        c = record.candidate
        self.rows[record.record_id] = {
            "record_id": record.record_id, "kind": c.kind, "entity": c.entity, "relation": c.relation, "text": c.text,
            "hash": record.content_hash, "valid_from": c.valid_from or c.provenance.occurred_at,
            "vector": record.vector,
            "language": record.language, "recorded_at": NOW, "rendered": record.rendered, "retired_at": None,
            "reason": None, "superseded_by": None, "message_ids": list(c.provenance.message_ids), "merged": [],
            "importance": c.importance, "pending": record.pending, "path": record.bank_path, "line": record.bank_line,
            "origin": c.provenance.origin,
        }  # fmt: skip

    async def merge_provenance(
        self, tenant: str, record_id: str, message_ids: Sequence[str], merged: str | None
    ) -> None:
        row = self.rows[record_id]
        row["message_ids"] = sorted({*row["message_ids"], *message_ids})
        row["merged"] += [merged] if merged else []

    async def supersede(self, tenant: str, old: Sequence[str], new: str, at: datetime) -> None:
        for record_id in old:
            self.rows[record_id].update(retired_at=NOW, reason="superseded", superseded_by=new)

    async def retire(self, tenant: str, record_id: str, at: datetime, reason: str) -> None:
        self.rows[record_id].update(retired_at=NOW, reason=reason, line=None)

    async def record(self, tenant: str, record_id: str) -> dict[str, Any] | None:
        return self.rows.get(record_id)

    async def bank(self, tenant: str, agent: str, path: str) -> list[BankRow]:
        return [
            BankRow(r["record_id"], r["text"], r["language"], r["recorded_at"], r["rendered"], r["retired_at"] is None)
            for r in self.rows.values()
            if r["path"] == path and (r["retired_at"] is None or r["line"] is not None)
        ]

    async def place(self, tenant: str, agent: str, path: str, placements: dict[str, tuple[int, str]]) -> None:
        for record_id, (line, rendered) in placements.items():
            self.rows[record_id].update(line=line, rendered=rendered)
        for row in self.rows.values():
            if row["path"] == path and row["retired_at"] is not None:
                row["line"] = None

    async def request_decided(
        self, tenant: str, request_id: str, agent: str, seq: int, record_id: str, outcome: str
    ) -> None:
        self.rows[record_id].setdefault("requests", []).append((request_id, outcome))

    def current(self) -> list[str]:
        return sorted(r["text"] for r in self.rows.values() if r["retired_at"] is None)


@pytest.fixture
def writer() -> Writer:
    vectors = {
        "I love spicy food": [1, 0, 0, 0, 0, 0, 0, 0],
        "I really love spicy food": [1, 0.2, 0, 0, 0, 0, 0, 0],  # cosine 0.98
        "其实我不吃辣了": [0.5, 0, 1, 0, 0, 0, 0, 0],  # cosine 0.45
    }
    return Writer(InMemoryStore(), InMemoryRecords(), AxisEmbedder(vectors), None)  # type: ignore[arg-type]


def ask(text: str, **fields: Any) -> RecordRequested:
    return RecordRequested(tenant_id=TENANT, record_id=f"019ac8e1-7a40-7000-8000-{len(text):012d}", text=text,
                           occurred_at=NOW, **fields)  # fmt: skip


def bank_text(writer: Writer, name: str) -> str:
    documents: InMemoryStore = writer.documents  # type: ignore[assignment]
    document = documents.documents[(TENANT, "main", f"memory/bank/{name}")]
    return document.text


async def test_a_request_becomes_a_record_and_one_dated_line_of_its_bank_file(writer: Writer) -> None:
    changes = await on_record_requested(writer, ask("I love spicy food", kind="preference", relation="spicy"), 7)
    assert [(c.path, c.version, c.ingest_seq) for c in changes] == [("memory/bank/preferences.md", 1, 7)]  # type: ignore[union-attr]
    assert bank_text(writer, "preferences.md") == "# Preferences\n\n- I love spicy food (noted on 2026-12-06)\n"


async def test_a_repetition_changes_no_record_and_no_version(writer: Writer) -> None:
    await on_record_requested(writer, ask("I love spicy food", kind="preference", relation="spicy"), 7)
    assert (
        await on_record_requested(writer, ask("I really love spicy food", kind="preference", relation="spicy"), 8) == ()
    )
    records: InMemoryRecords = writer.records  # type: ignore[assignment]
    assert records.current() == ["I love spicy food"]


async def test_a_new_value_replaces_the_old_line_in_the_next_version(writer: Writer) -> None:
    await on_record_requested(writer, ask("I love spicy food", kind="preference", relation="spicy"), 7)
    [change] = await on_record_requested(writer, ask("其实我不吃辣了", kind="preference", relation="spicy"), 8)
    assert change.version == 2  # type: ignore[union-attr]
    assert bank_text(writer, "preferences.md") == "# Preferences\n\n- 其实我不吃辣了（记于 2026-12-06）\n"


async def test_a_persons_edit_of_the_line_supersedes_the_record_with_their_words(writer: Writer) -> None:
    await on_record_requested(writer, ask("I love spicy food", kind="preference", relation="spicy"), 7)
    edited = "# Preferences\n\n- I love mildly spicy food\n"
    put = MemoryWriteRequested(tenant_id=TENANT, path="memory/bank/preferences.md", mode="put", text=edited)
    await on_memory_write(writer, put, 9)
    records: InMemoryRecords = writer.records  # type: ignore[assignment]
    assert records.current() == ["I love mildly spicy food"]
    [new] = [r for r in records.rows.values() if r["retired_at"] is None]
    assert (new["origin"], new["rendered"], new["line"]) == ("owner", "- I love mildly spicy food", 3)
    assert bank_text(writer, "preferences.md") == edited


async def test_a_users_remember_in_a_transcript_entry_becomes_a_record(writer: Writer) -> None:
    entry = TranscriptAppended(
        tenant_id=TENANT, session_key="agent:main:main", session_id=SID, position=2, reset_index=0, message_id="m1",
        role="user", text="Remember that I love spicy food", channel="api", chat_type="direct", token_estimate=8,
        occurred_at=NOW,
    )  # fmt: skip
    [request] = explicit_requests([entry])
    assert (request.explicit, request.message_ids, request.origin) == (True, ("m1",), "owner")
    [again] = explicit_requests([entry])  # the same entry read again asks for the same record
    assert (again.event_id, again.record_id) == (request.event_id, request.record_id)
    [change] = await on_record_requested(writer, request, 3)
    assert "- I love spicy food (noted on 2026-12-06)" in change.text  # type: ignore[union-attr]
    question = entry.model_copy(update={"text": "do you remember my food?", "message_id": "m2"})
    assert explicit_requests([question]) == []


class EditedMeanwhile(InMemoryStore):
    """A person's version lands between the writer's read of the bank file and its save (another transaction
    committing first, where the row did not exist yet to be locked)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.pending: str | None = text

    async def save_document(self, tenant_id: str, agent_id: str, write: DocumentWrite) -> None:
        if self.pending is not None:
            theirs, self.pending = self.pending, None
            await super().save_document(tenant_id, agent_id, DocumentWrite(write.path, 1, theirs, "created"))
        await super().save_document(tenant_id, agent_id, write)


async def test_a_render_planned_on_a_stale_read_fails_and_its_retry_keeps_the_persons_version() -> None:
    mine = "# Preferences\n\n- a line I wrote myself\n"
    documents = EditedMeanwhile(mine)
    request = ask("I love spicy food", kind="preference", relation="spicy")
    first = Writer(documents, InMemoryRecords(), AxisEmbedder({}), None)
    with pytest.raises(StaleDocumentError):
        await on_record_requested(first, request, 7)  # the transaction rolls back, the projection redelivers
    retry = Writer(documents, InMemoryRecords(), AxisEmbedder({}), None)  # the records as rolled back
    [change] = await on_record_requested(retry, request, 7)
    assert change.version == 2  # type: ignore[union-attr]
    assert documents.documents[(TENANT, "main", "memory/bank/preferences.md")].text == (
        mine + "- I love spicy food (noted on 2026-12-06)\n"
    )
