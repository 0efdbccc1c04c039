"""How the indexer hands a batch to asyncpg: the searchable messages and the remembered turns each travel as one
array of records (indexer.message_row / indexer.turn_row, 0144), not as one array per column. asyncpg checks every
element of an array argument in Python, so column arrays cost a check per value and one array of records one per
row (measured: the client's CPU per message row halves)."""

import uuid
from datetime import UTC, datetime
from typing import Any

from cairn.events import TranscriptAppended
from cairn.indexer.store import INSERT_MESSAGES, MESSAGE_COLUMNS, insert_messages, message_row
from cairn.memindex import store
from cairn.memindex.transcripts import Turn

AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    async def execute(self, sql: str, *args: Any) -> str:
        self.calls.append((sql, args))
        return "INSERT 0 0"


def _event(position: int) -> TranscriptAppended:
    return TranscriptAppended(
        tenant_id=str(uuid.uuid4()), agent_id="main", session_key="agent:main:main", session_id=str(uuid.uuid4()),
        position=position, reset_index=0, message_id=str(uuid.uuid4()), role="user", text=f"renew it by {position}",
        channel="api", chat_type="direct", token_estimate=7, ingest_seq=position,
    )  # fmt: skip


async def test_a_batch_of_messages_travels_as_one_array_of_message_rows() -> None:
    conn, rows = Recorder(), [message_row(_event(position)) for position in (1, 2, 3)]
    await insert_messages(conn, rows)
    ((sql, args),) = conn.calls
    assert sql == INSERT_MESSAGES
    assert "unnest($1::indexer.message_row[])" in sql
    assert "$2" not in sql
    assert args == (rows,)  # one parameter: the rows as they are, each in MESSAGE_COLUMNS order
    assert all(len(row) == len(MESSAGE_COLUMNS) for row in args[0])


async def test_a_batch_s_turns_travel_as_one_array_of_turn_rows_with_message_ids_as_text() -> None:
    conn, tenant, session = Recorder(), uuid.uuid4(), uuid.uuid4()
    message_ids = [str(uuid.uuid4()) for _ in range(2)]
    turns = [
        (tenant, "main", session, "agent:main:main", Turn(position, 0, message_id, "user", None, "hi", AT, None))
        for position, message_id in enumerate(message_ids, start=1)
    ]
    pending = {(tenant, session): store.Pending("main", "agent:main:main", 1)}
    await store.write_transcript_batch(conn, turns, pending, (30.0, 300.0), {(tenant, "main"): 2})
    ((sql, args),) = conn.calls
    assert sql == store.WRITE_TRANSCRIPT_BATCH
    assert "unnest($1::indexer.turn_row[])" in sql
    records = args[0]
    assert records == [
        (tenant, "main", session, position, 0, "agent:main:main", message_id, "user", None, "hi", AT, None)
        for position, message_id in enumerate(message_ids, start=1)
    ]
    assert all(type(record[6]) is str for record in records)  # no uuid.UUID built per turn
    # the marks and positions follow as before, numbered from $2
    assert args[1:] == ([tenant], ["main"], [session], ["agent:main:main"], 30.0, 300.0, [1], [tenant], ["main"], [2])
