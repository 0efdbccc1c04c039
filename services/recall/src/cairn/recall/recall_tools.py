"""The two tools of recall's lane-2 sub-agent, `memory_search` and `memory_get`, confined to one recall's
scope: the agent's memory documents and the transcripts of the same person's other direct conversations
(`recall_scope.same_person_sessions`; the asking session never). A path outside memory or a session key
outside that list is refused to the model as a tool error, never read.

Snapshots (`memory/snapshots/`) are left out: they are verbatim transcripts of whichever session was reset,
possibly another person's, and carry no owner to check.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from cairn.events.documents import MEMORY_FILE, SNAPSHOT_FOLDER
from cairn.recall.files import window
from cairn.recall.files_queries import DocumentStore
from cairn.recall.history_queries import HistoryStore
from cairn.recall.memory_search import MemoryQuery, MemorySearch
from cairn.recall.queries import Page, ReadStore, Scope
from cairn.text import build_query, redact, snippet

SEARCH_LIMIT = 6  # hits per side (documents, transcripts) per tool call
SNIPPET_CHARS = 300
SESSION_CANDIDATES = 1000
GET_LINES, MAX_GET_LINES, MAX_GET_CHARS = 40, 80, 4000
GET_MESSAGES = 20
MESSAGE_CHARS = 400
ROLES = ("user", "assistant")

SEARCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "memory_search",
        "description": "Search the user's memory notes and their earlier conversations with you. Returns hits with a "
        "`ref` to open with memory_get.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "words or a question to look for"}},
            "required": ["query"],
        },
    },
}
GET_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "memory_get",
        "description": "Read a memory note's lines (ref: its path) or an earlier conversation's latest messages "
        "(ref: `session:<session key>` from a search hit).",
        "parameters": {
            "type": "object",
            "properties": {
                "ref": {"type": "string"},
                "from": {"type": "integer", "description": "first line of a note (from 1)"},
                "lines": {"type": "integer", "description": f"lines of a note to read, at most {MAX_GET_LINES}"},
            },
            "required": ["ref"],
        },
    },
}
TOOLS = [SEARCH_TOOL, GET_TOOL]


class Refused(Exception):
    """A tool call outside the recall's scope or malformed: told to the model, never executed."""


@dataclass(frozen=True)
class Reach:
    """Where one recall may look."""

    tenant: str
    agent: str
    session_keys: tuple[str, ...]  # the same person's other direct sessions


def in_memory(path: str) -> bool:
    return (path == MEMORY_FILE or path.startswith("memory/")) and not path.startswith(f"{SNAPSHOT_FOLDER}/")


@dataclass
class MemoryTools:
    search_index: MemorySearch
    reads: ReadStore
    documents: DocumentStore
    history: HistoryStore
    reach: Reach
    candidates: list[dict[str, Any]] = field(default_factory=list)  # every hit shown, for the trace

    async def search(self, text: str) -> list[dict[str, Any]]:
        """Documents and the reachable transcripts, best first within each; each hit also joins `candidates`."""
        reach = self.reach
        found = await self.search_index.search(
            reach.tenant, MemoryQuery(reach.agent, text, SEARCH_LIMIT, None, ("memory",), None)
        )
        hits: list[dict[str, Any]] = [
            {"lane": 2, "ref": h.detail.path, "path": h.detail.path, "lines": [h.detail.start_line, h.detail.end_line],
             "score": h.score, "snippet": h.snippet}
            for h in found.hits if h.detail.path and in_memory(h.detail.path)
        ]  # fmt: skip
        query = build_query(text)
        if reach.session_keys and query is not None:
            scope = Scope(reach.agent, list(reach.session_keys))
            rows = await self.reads.search_messages(
                reach.tenant, scope, query, Page(SEARCH_LIMIT, 0, SESSION_CANDIDATES)
            )
            hits += [
                {"lane": 2, "ref": f"session:{r.session_key}", "session_key": r.session_key, "role": r.role,
                 "said_at": r.occurred_at.isoformat(), "score": round(r.score, 6),
                 "snippet": snippet(r.text, query.terms, SNIPPET_CHARS)}
                for r in rows
            ]  # fmt: skip
        self.candidates += hits
        return hits

    async def get(self, ref: str, start: int, lines: int) -> dict[str, Any]:
        reach = self.reach
        if ref.startswith("session:"):
            key = ref.removeprefix("session:")
            if key not in reach.session_keys:
                raise Refused(f"{ref} is not one of this user's other conversations")
            return {"ref": ref, "messages": await self._messages(key)}
        if not in_memory(ref):
            raise Refused(f"{ref} is not a memory note (MEMORY.md or memory/…)")
        document = await self.documents.document(reach.tenant, reach.agent, ref, None)
        if document is None:
            raise Refused(f"{ref} does not exist")
        shown = window(document.text, max(start, 1), min(max(lines, 1), MAX_GET_LINES), MAX_GET_CHARS)
        return {"ref": ref, "from": shown.start, "text": redact(shown.text), "next_from": shown.next_from}

    async def _messages(self, key: str) -> list[dict[str, str]]:
        async with self.history.reader(self.reach.tenant) as reads:
            head = await reads.session(self.reach.agent, key)
            if head is None:
                return []
            stored = await reads.newest_messages(
                head.session_id, head.reset_index, ("user", "assistant"), GET_MESSAGES, 0
            )
        return [
            {"role": m.role, "said_at": m.occurred_at.isoformat(), "text": snippet(m.text, (), MESSAGE_CHARS)}
            for m in reversed(stored)
        ]

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """A tool call's result as the JSON text the model reads; a refusal or bad arguments as `{"error": …}`."""
        try:
            if name == "memory_search":
                query = arguments.get("query")
                if not isinstance(query, str) or not query.strip():
                    raise Refused("memory_search needs a non-empty `query` string")
                hits = await self.search(query[:1000])
                result: Any = {"results": [{k: v for k, v in h.items() if k != "lane"} for h in hits]}
            elif name == "memory_get":
                ref, start, lines = arguments.get("ref"), arguments.get("from", 1), arguments.get("lines", GET_LINES)
                if not isinstance(ref, str) or not isinstance(start, int) or not isinstance(lines, int):
                    raise Refused("memory_get needs `ref` (a string) and integer `from`/`lines`")
                result = await self.get(ref, start, lines)
            else:
                raise Refused(f"unknown tool {name}; use memory_search or memory_get")
        except Refused as refusal:
            result = {"error": str(refusal)}
        return json.dumps(result, ensure_ascii=False)
