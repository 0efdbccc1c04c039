"""The indexer's projection: what each event means for the search tables, applied per batch.

Each event becomes its row (a searchable message's full-text row, `store.message_row`) and its
read-your-writes position in memory; `complete` writes a tenant's rows in one statement and its
positions in one more.
"""

from collections.abc import Sequence
from typing import Any, cast

from cairn.events import Event, ResetBoundary, SessionCreated, SessionForked, TranscriptAppended
from cairn.indexer import store
from cairn.platform.consumer import Delivery, Unit

Connection = Any
# Events with nothing to index still carry an ingest position the index has reached once they are applied:
# a reset, a console thread's creation, a fork (sent after its copied entries).
Positioned = TranscriptAppended | ResetBoundary | SessionCreated | SessionForked
POSITIONED = frozenset({TranscriptAppended, ResetBoundary, SessionCreated, SessionForked})


class IndexerProjection:
    def handles(self, event: Event) -> bool:
        return type(event) in POSITIONED

    def begin(self, conn: Connection, events: Sequence[Event]) -> Unit:
        return _Batch(conn, events[0].tenant_id if events else "")


class _Batch:
    def __init__(self, conn: Connection, tenant: str) -> None:
        self._conn, self._tenant = conn, tenant
        self._rows: list[tuple[Any, ...]] = []
        self._reached: dict[str, int] = {}  # agent → highest ingest position applied

    async def handle(self, event: Event, delivery: Delivery) -> Sequence[Event]:
        if isinstance(event, TranscriptAppended) and store.is_searchable(event):
            self._rows.append(store.message_row(event))
        seq = cast(Positioned, event).ingest_seq  # `handles` admits nothing else
        if seq is not None:
            self._reached[event.agent_id] = max(seq, self._reached.get(event.agent_id, seq))
        return []

    async def complete(self) -> None:
        await store.insert_messages(self._conn, self._rows)
        await store.advance(self._conn, self._tenant, self._reached)
