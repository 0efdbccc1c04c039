"""The indexer's projection: what each event means for the search tables, applied per batch.

Each event becomes its row (a searchable message's full-text row, `store.message_row`) and its
read-your-writes position in memory; `complete` writes the batch's rows in one statement and its
positions in one more, whatever the number of tenants (each row names its tenant: `across_tenants`).
"""

from collections.abc import Sequence
from typing import Any, cast

from cairn.delivery.consumer import Delivery, Unit
from cairn.events import Event, ResetBoundary, SessionCreated, SessionForked, TranscriptAppended
from cairn.indexer import store

Connection = Any
# Events with nothing to index still carry an ingest position the index has reached once they are applied:
# a reset, a console thread's creation, a fork (sent after its copied entries).
Positioned = TranscriptAppended | ResetBoundary | SessionCreated | SessionForked
POSITIONED = frozenset({TranscriptAppended, ResetBoundary, SessionCreated, SessionForked})


class IndexerProjection:
    across_tenants = True

    def handles(self, event: Event) -> bool:
        return type(event) in POSITIONED

    def begin(self, conn: Connection, events: Sequence[Event]) -> Unit:
        return _Batch(conn)


class _Batch:
    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._rows: list[tuple[Any, ...]] = []
        self._reached: dict[tuple[str, str], int] = {}  # (tenant, agent) → highest ingest position applied

    async def handle(self, event: Event, delivery: Delivery) -> Sequence[Event]:
        if isinstance(event, TranscriptAppended) and store.is_searchable(event):
            self._rows.append(store.message_row(event))
        seq = cast(Positioned, event).ingest_seq  # `handles` admits nothing else
        if seq is not None:
            agent = (event.tenant_id, event.agent_id)
            self._reached[agent] = max(seq, self._reached.get(agent, seq))
        return []

    async def complete(self) -> None:
        await store.insert_messages(self._conn, self._rows)
        await store.advance(self._conn, self._reached)
