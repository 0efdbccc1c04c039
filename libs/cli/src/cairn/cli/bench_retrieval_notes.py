"""`cairn bench retrieval --mode notes`: how well memory search finds a fact in memory documents, scored by
`../shared/eval/evaluate.py` like the other modes.

Each sitting of a dataset becomes one note, written through the public write API to a fresh tenant per
`conv_id` (`memory/summaries/<sitting>.md`: its time as the heading, then one list item per turn, as a flush or a
person would note a conversation). The questions are asked through `POST /v1/memory/search` over memory only
(limit 50), and each hit's lines name the turns they hold, hits in the order they are listed: the sitting's
note of a hit is its session, its lines its turns. The notes are undated paths (the datasets are of 2023: a
30-day half-life would flatten every score), so the time is the heading's words, as in a note a person wrote.

`--questions` asks another file's questions of the same notes, e.g. the English MemoryBank questions of the
Chinese conversations: a cross-lingual paraphrase of every probe.
"""

import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from cairn.cli.bench import new_tenant
from cairn.cli.bench_retrieval import TOP, Conversation, RetrievalResult, _jsonl, _progress, _write_run

NOTES = "memory/summaries"  # the layout's folder of notes that are no daily note
_NOT_A_WORD = re.compile(r"\W")
FIRST_TURN_LINE = 3  # line 1 the heading, line 2 blank


def note_of(rows: list[dict[str, Any]]) -> str:
    """A sitting as a Markdown note: its time as the heading, one list item per turn (a turn's lines joined), said
    by its speaker (LoCoMo's text does not name them; MemoryBank's does, with the AI's reply)."""
    items = []
    for row in rows:
        text = " / ".join(part.strip() for part in str(row["text"]).splitlines() if part.strip())
        speaker = row.get("speaker")
        items.append(f"- {text}" if not speaker or text.startswith(f"{speaker}:") else f"- {speaker}: {text}")
    return "\n".join([f"# {rows[0]['timestamp']}", "", *items]) + "\n"


def _note_path(session_id: str) -> str:
    """An undated path: no `YYYY-MM-DD` in its name (see the module's docstring)."""
    return f"{NOTES}/{_NOT_A_WORD.sub('_', session_id)}.md"


def _write_notes(endpoints: dict[str, str], conv_id: str, sittings: dict[str, list[dict[str, Any]]]) -> Conversation:
    key = new_tenant(endpoints, f"bench-notes-{conv_id}")
    headers = {"Authorization": f"Bearer {key}"}
    position = ""
    with httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=120) as ingest:
        for session_id, rows in sittings.items():
            written = ingest.put(f"/v1/memory/files/{_note_path(session_id)}", json={"text": note_of(rows)})
            position = written.raise_for_status().json()["position"]
    return Conversation(key, "main", position)


def _wait_notes(recall_url: str, conversation: Conversation, timeout_s: float) -> None:
    headers = {"Authorization": f"Bearer {conversation.api_key}"}
    body = {"agent_id": conversation.agent_id, "query": "x", "consistent_with": conversation.position}
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=recall_url, headers=headers, timeout=60) as recall:
        while recall.post("/v1/memory/search", json=body).raise_for_status().json()["indexing"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"notes not indexed within {timeout_s:.0f}s")


def ranked_turns(hits: list[dict[str, Any]], turns_of: dict[str, list[str]]) -> list[str]:
    """The doc ids of the turns the hits' lines hold, hits in their listed order, lines in order, each once."""
    ranked: dict[str, None] = {}
    for hit in hits:
        turns = turns_of.get(hit["path"], [])
        for line in range(hit["start_line"], hit["end_line"] + 1):
            if 0 <= line - FIRST_TURN_LINE < len(turns):
                ranked.setdefault(turns[line - FIRST_TURN_LINE], None)
    return list(ranked)[:TOP]


def run_notes_retrieval(
    endpoints: dict[str, str], data: Path, out: Path, questions_file: Path | None = None, timeout_s: float = 600
) -> RetrievalResult:
    corpus = _jsonl(data / "corpus.jsonl")
    questions = _jsonl(questions_file or data / "questions.jsonl")
    sittings: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in corpus:
        sittings[row["conv_id"]][row["session_id"]].append(row)
    turns_of = {
        conv_id: {_note_path(s): [r["doc_id"] for r in rows] for s, rows in by_session.items()}
        for conv_id, by_session in sittings.items()
    }
    started = time.perf_counter()
    conversations = {conv_id: _write_notes(endpoints, conv_id, by_session) for conv_id, by_session in sittings.items()}
    written = time.perf_counter()
    for conversation in conversations.values():
        _wait_notes(endpoints["CAIRN_RECALL_URL"], conversation, timeout_s)
    indexed = time.perf_counter()
    print(f"wrote {sum(len(s) for s in sittings.values())} notes in {written - started:.1f}s; "
          f"indexed after {indexed - written:.1f}s more")  # fmt: skip
    lines, empty = [], 0
    for done, question in enumerate(questions, 1):
        conversation = conversations[question["conv_id"]]
        headers = {"Authorization": f"Bearer {conversation.api_key}"}
        body = {"agent_id": conversation.agent_id, "query": question["question"], "limit": TOP, "corpus": "memory"}
        with httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=60) as recall:
            hits = recall.post("/v1/memory/search", json=body).raise_for_status().json()["results"]
        ranked = ranked_turns(hits, turns_of[question["conv_id"]])
        empty += not ranked
        lines.append({"question_id": question["question_id"], "ranked_ids": ranked})
        if done % 25 == 0 or done == len(questions):
            _progress("questions", done, len(questions), indexed)
    answered = time.perf_counter()
    _write_run(out, lines)
    print(f"written {out} ({len(lines)} questions); score it with:")
    print(f"  python ../shared/eval/evaluate.py {data} {out} --level turn|session")
    return RetrievalResult(
        dataset=data.name, mode="notes", conversations=len(conversations), messages=len(corpus),
        questions=len(questions), ingest_seconds=round(written - started, 3),
        index_wait_seconds=round(indexed - written, 3), query_seconds=round(answered - indexed, 3),
        query_ms_mean=round(1000 * (answered - indexed) / max(len(questions), 1), 2), empty_answers=empty,
    )  # fmt: skip
