"""What a searchable message's row carries to Postgres: its ids as the event's UUID text, which asyncpg encodes as
uuid in C (building `uuid.UUID` objects first cost ~8 us of the indexer's CPU per message)."""

import uuid

from cairn.events import TranscriptAppended
from cairn.indexer.store import MESSAGE_COLUMNS, message_row


def test_a_message_row_carries_its_ids_as_the_event_s_text() -> None:
    event = TranscriptAppended(
        tenant_id=str(uuid.uuid4()), agent_id="main", session_key="agent:main:main", session_id=str(uuid.uuid4()),
        position=1, reset_index=0, message_id=str(uuid.uuid4()), role="user", text="renew the domain before Friday",
        channel="api", chat_type="direct", token_estimate=7, ingest_seq=3,
    )  # fmt: skip
    row = dict(zip(MESSAGE_COLUMNS, message_row(event), strict=True))
    for column in ("tenant_id", "message_id", "session_id"):
        assert row[column] == getattr(event, column)
        assert type(row[column]) is str, f"{column} goes as text"
    assert row["ingest_seq"] == 3
