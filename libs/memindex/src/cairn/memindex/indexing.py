"""From a document or a transcript to stored chunks: cut, reuse the vectors of unchanged text, embed the
rest in batches, replace the old chunks. Used by the indexer's consumers and by `cairn reindex`, so a
rebuild runs exactly the code that built the index in the first place."""

import hashlib
import re
import uuid
from collections.abc import Sequence
from datetime import date, datetime
from typing import NamedTuple

import numpy as np

from cairn.events.documents import trusted_path
from cairn.memindex import store
from cairn.memindex.chunking import chunk_lines
from cairn.memindex.embeddings import Embedder, Vectors
from cairn.memindex.entries import chunk_entries
from cairn.memindex.settings import MemoryIndexSettings
from cairn.memindex.store import ChunkRow, Connection
from cairn.memindex.transcripts import Turn, render_turn, sitting_breaks, turn_in_context
from cairn.text import index_terms, to_tsvector_literal

_DATED = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")


def dated_note(path: str) -> date | None:
    """The day a dated note is about (`memory/daily/2026-11-30.md`, snapshots, summaries); None for
    `MEMORY.md` and bank files, which never age, and for undated files."""
    if trusted_path(path):
        return None
    match = _DATED.search(path.rsplit("/", 1)[-1])
    if match is None:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


class Indexed(NamedTuple):
    chunks: int  # chunks written (the last one of the previous call rewritten among them)
    more: bool  # turns past this slice are still to be chunked


class MemoryIndex:
    def __init__(self, embedder: Embedder, settings: MemoryIndexSettings) -> None:
        self.embedder, self.settings = embedder, settings

    async def put_document(
        self, conn: Connection, tenant: str, agent: str, path: str, version: int, text: str, at: datetime
    ) -> int:
        """Replace the document's chunks by those of `text`; an older version than the indexed one is ignored."""
        tenant_id = uuid.UUID(tenant)
        indexed = await store.document_version(conn, tenant_id, agent, path)
        if indexed is not None and indexed > version:
            return 0
        rows = self.document_rows(path, version, text, at)
        vectors = await self._vectors(conn, tenant_id, rows)
        await store.delete_document(conn, tenant_id, agent, path)
        await store.insert_chunks(conn, tenant_id, agent, rows, self.embedder.model, vectors)
        return len(rows)

    async def delete_document(self, conn: Connection, tenant: str, agent: str, path: str) -> int:
        return await store.delete_document(conn, uuid.UUID(tenant), agent, path)

    def document_rows(self, path: str, version: int, text: str, at: datetime) -> list[ChunkRow]:
        """Chunks of a memory document, whatever its path: its entries (`entries`), each with its context."""
        spans = chunk_entries(text.splitlines(), self.settings.chunk_tokens, self.settings.overlap_tokens)
        dated = dated_note(path)
        return [
            _row("memory", s.first + 1, s.last + 1, s.text, path=path, version=version, dated=dated, occurred_at=at,
                 context=s.context or None)
            for s in spans
        ]  # fmt: skip

    async def index_session(
        self, conn: Connection, tenant: str, agent: str, session_id: uuid.UUID, slice_turns: int | None = None
    ) -> Indexed:
        """Re-chunk the transcript from its last chunk on (earlier chunks never change: see `chunking`). With
        `slice_turns`, only about that many turns are taken, so a long transcript is indexed in several
        short transactions: the next call goes on from the slice's last chunk, which may have been cut
        short by the slice's end, exactly as it would after turns were appended."""
        tenant_id = uuid.UUID(tenant)
        while True:
            start, turns, key, more = await store.session_tail(conn, tenant_id, session_id, slice_turns)
            rows = self.session_rows(key, session_id, turns)
            if not more or slice_turns is None or max((row.start_line for row in rows), default=start) > start:
                break
            slice_turns *= 2  # the slice fits in one chunk: the next call would start at the same turn again
        vectors = await self._vectors(conn, tenant_id, rows)
        await store.delete_session_from(conn, tenant_id, agent, session_id, start)
        await store.insert_chunks(conn, tenant_id, agent, rows, self.embedder.model, vectors)
        await self._turn_vectors(conn, tenant_id, session_id, start, turns)
        return Indexed(len(rows), more)

    async def _turn_vectors(
        self, conn: Connection, tenant: uuid.UUID, session_id: uuid.UUID, start: int, turns: Sequence[Turn]
    ) -> None:
        """A vector per new turn (its line after the one before it, `turn_in_context`), so a search can tell which
        turns of a chunk it matches."""
        model = self.embedder.model
        if model is None:
            return
        missing = await store.turns_without_vector(conn, tenant, session_id, start, model)
        todo = [(before, turn) for before, turn in zip([None, *turns], turns, strict=False) if turn.position in missing]
        if todo:
            vectors = await self.embedder.embed([turn_in_context(before, turn) for before, turn in todo])
            await store.set_turn_vectors(conn, tenant, session_id, [t.position for _, t in todo], model, vectors)

    def session_rows(self, key: str, session_id: uuid.UUID, turns: Sequence[Turn]) -> list[ChunkRow]:
        lines = [render_turn(turn) for turn in turns]
        spans = chunk_lines(lines, self.settings.chunk_tokens, self.settings.overlap_tokens, sitting_breaks(turns))
        return [
            _row(
                "sessions", turns[s.first].position, turns[s.last].position, s.text, session_key=key,
                session_id=session_id, occurred_at=turns[s.first].occurred_at,
                message_ids=tuple(uuid.UUID(t.message_id) for t in turns[s.first : s.last + 1]),
                external_ids=tuple(t.external_id for t in turns[s.first : s.last + 1]),
            )
            for s in spans
        ]  # fmt: skip

    async def reembed(self, conn: Connection, tenant: str, agent: str, batch: int) -> int:
        """Give up to `batch` chunks, then turns, of another model (or none) a vector of the configured model;
        returns how many got one (0: the agent's index is all of the configured model)."""
        model = self.embedder.model
        if model is None:
            return 0
        tenant_id = uuid.UUID(tenant)
        rows = await store.stale_chunks(conn, tenant_id, agent, model, batch)
        if rows:
            vectors = await self.embedder.embed([row["text"] for row in rows])
            await store.set_vectors(conn, tenant_id, [row["chunk_id"] for row in rows], model, vectors)
            return len(rows)
        turns = await store.stale_turns(conn, tenant_id, agent, model, batch)
        if turns:
            vectors = await self.embedder.embed([turn_in_context(before, turn) for _, before, turn in turns])
            for session_id in {session_id for session_id, _, _ in turns}:
                mine = [i for i, (s, _, _) in enumerate(turns) if s == session_id]
                positions = [turns[i][2].position for i in mine]
                await store.set_turn_vectors(conn, tenant_id, session_id, positions, model, vectors[mine])
        return len(turns)

    async def _vectors(self, conn: Connection, tenant: uuid.UUID, rows: Sequence[ChunkRow]) -> Vectors | None:
        """Vectors for `rows`: text already embedded by this model is reused, only the rest is embedded."""
        model, dims = self.embedder.model, self.embedder.dimensions
        if model is None or not rows:
            return None
        known = await store.known_vectors(conn, tenant, model, [row.content_hash for row in rows])
        missing = [row for row in rows if row.content_hash not in known]
        fresh = await self.embedder.embed([row.searched for row in missing]) if missing else None
        made = {row.content_hash: fresh[i] for i, row in enumerate(missing)} if fresh is not None else {}
        width = dims or (fresh.shape[1] if fresh is not None else len(next(iter(known.values()))))
        out = np.empty((len(rows), width), dtype=np.float32)
        for i, row in enumerate(rows):
            out[i] = made[row.content_hash] if row.content_hash in made else known[row.content_hash]
        return out


def _row(source: str, start: int, end: int, text: str, context: str | None = None, **fields: object) -> ChunkRow:
    """A chunk whose words and vector are those of its context and text together (`ChunkRow.searched`)."""
    searched = store.searched_text(context, text)
    return ChunkRow(
        source=source,
        start_line=start,
        end_line=end,
        text=text,
        terms=to_tsvector_literal(index_terms(searched)),
        content_hash=content_hash(searched),
        context=context,
        **fields,  # type: ignore[arg-type]
    )
