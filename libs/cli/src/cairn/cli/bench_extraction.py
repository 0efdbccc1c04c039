"""`cairn bench extraction`: what model-based extraction after turns costs on a real conversation.

One LoCoMo conversation (read in place from the shared datasets) is posted through ingest into a fresh tenant,
with its original times, one session per LoCoMo sitting; the tenant's model is a scripted chat-completions
server run by the bench (the override needs `CAIRN_LLM_ALLOWED_HOSTS=127.0.0.1`, which `make up` sets), which
answers every call with the same two candidates. The bench waits until consolidation has read every turn
(`GET /v1/memory/status`, `extraction.turns`) and reports model calls and tokens per 100 turns and the turns
read per second, first post to last turn read: the debounce (`CAIRN_EXTRACTION_DEBOUNCE_S`, 30 s) is part of it.
Prompt tokens are the server's estimate, a quarter of the prompt's characters, as a real model would count
them roughly; the answer's are the fixed answer's."""

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from cairn.cli.bench import create_tenant, report_table
from cairn.cli.importer import BATCH, to_message

CHARS_PER_TOKEN = 4
ANSWER = {
    "memories": [
        {"kind": "plan", "text": "The user is going to a support group next Tuesday", "entity": "user",
         "relation": "support group", "importance": 0.8, "original": "next Tuesday I go to the support group",
         "turns": [1]},
        {"kind": "preference", "text": "The user likes painting", "entity": "user", "relation": "hobby",
         "importance": 0.6, "original": "I love painting", "turns": [2]},
    ]
}  # fmt: skip
# Model calls spent building LoCoMo's memory, as the issue quotes them (all ten conversations).
REFERENCES = "Mem0 1,602 calls, A-MEM 1,175, LightMem 30 (all of LoCoMo)"


class ScriptedModel:
    """A chat-completions server in a thread answering every call with `ANSWER` as a `record_memories` call."""

    def __init__(self) -> None:
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.1,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedModel":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        prompt = sum(len(str(m.get("content") or "")) for m in request.get("messages", []))
        arguments = json.dumps(ANSWER)
        usage = {"prompt_tokens": prompt // CHARS_PER_TOKEN, "completion_tokens": len(arguments) // CHARS_PER_TOKEN}
        with self._lock:
            self.calls += 1
            self.prompt_tokens += usage["prompt_tokens"]
            self.completion_tokens += usage["completion_tokens"]
        call = {"id": "c0", "type": "function", "function": {"name": "record_memories", "arguments": arguments}}
        return {"id": "x", "object": "chat.completion", "model": request.get("model", "scripted"), "usage": usage,
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}  # fmt: skip

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                data = json.dumps(model.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler


@dataclass(frozen=True)
class ExtractionResult:
    conversation: str
    turns: int
    sessions: int
    model_calls: int
    calls_per_100_turns: float
    prompt_tokens_per_100_turns: float
    completion_tokens_per_100_turns: float
    candidates: int
    bad_replies: int
    seconds: float
    turns_per_s: float


def conversation_rows(corpus: Path, conversation: str, limit: int | None) -> list[dict[str, Any]]:
    rows = []
    with corpus.open() as lines:
        for line in lines:
            row = json.loads(line)
            if row["conv_id"] == conversation:
                rows.append(row)
    return rows[:limit] if limit else rows


def run_extraction(
    endpoints: dict[str, str], corpus: Path, conversation: str, limit: int | None = None, timeout_s: float = 900.0
) -> ExtractionResult:
    rows = conversation_rows(corpus, conversation, limit)
    if not rows:
        raise SystemExit(f"no turns of {conversation} in {corpus}")
    messages = [to_message(row) for row in rows]
    agent = messages[0]["agent_id"]
    with ScriptedModel() as model:
        tenant, key = create_tenant(endpoints, "bench-extraction")
        _use_model(endpoints, tenant, model)
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=60) as ingest:
            started = time.monotonic()
            for at in range(0, len(messages), BATCH):
                ingest.post("/v1/messages/batch", json={"messages": messages[at : at + BATCH]}).raise_for_status()
        figures = _wait_read(endpoints["CAIRN_RECALL_URL"], headers, agent, len(messages), timeout_s)
        seconds = time.monotonic() - started
    per_100 = 100 / len(messages)
    return ExtractionResult(
        conversation=conversation, turns=len(messages), sessions=len({m["session_key"] for m in messages}),
        model_calls=figures["model_calls"], calls_per_100_turns=round(figures["model_calls"] * per_100, 2),
        prompt_tokens_per_100_turns=round(figures["prompt_tokens"] * per_100, 1),
        completion_tokens_per_100_turns=round(figures["completion_tokens"] * per_100, 1),
        candidates=figures["candidates"], bad_replies=figures["bad_replies"], seconds=round(seconds, 2),
        turns_per_s=round(len(messages) / seconds, 2),
    )  # fmt: skip


def _use_model(endpoints: dict[str, str], tenant: str, model: ScriptedModel) -> None:
    admin = {"Authorization": f"Bearer {endpoints['CAIRN_ADMIN_TOKEN']}"}
    response = httpx.put(f"{endpoints['CAIRN_INGEST_URL']}/v1/admin/tenants/{tenant}/llm", headers=admin,
                         json={"base_url": model.base_url, "model": "scripted"}, timeout=30)  # fmt: skip
    if response.status_code == 422:
        raise SystemExit("the tenant's model override was refused; start the stack with CAIRN_LLM_ALLOWED_HOSTS="
                         "127.0.0.1 (make up sets it when unset)")  # fmt: skip
    response.raise_for_status()


def _wait_read(recall_url: str, headers: dict[str, str], agent: str, turns: int, timeout_s: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=recall_url, headers=headers, timeout=30) as recall:
        while True:
            status = recall.get("/v1/memory/status", params={"agent_id": agent}).raise_for_status().json()
            figures: dict[str, int] | None = status.get("extraction")
            if figures and figures["turns"] + figures["turns_without_model"] >= turns:
                if figures["turns_without_model"]:
                    raise SystemExit(f"{figures['turns_without_model']} turns were read without a model")
                return figures
            if time.monotonic() > deadline:
                raise SystemExit(f"extraction read {figures and figures['turns']} of {turns} turns in {timeout_s} s")
            time.sleep(0.5)


def report_extraction(result: ExtractionResult, out: Path) -> None:
    rows = [
        ("turns (sessions)", f"{result.turns} ({result.sessions})", ""),
        ("model calls", str(result.model_calls), "at most one per batch of turns"),
        ("model calls per 100 turns", f"{result.calls_per_100_turns:g}", REFERENCES),
        ("prompt tokens per 100 turns (est.)", f"{result.prompt_tokens_per_100_turns:g}", ""),
        ("answer tokens per 100 turns", f"{result.completion_tokens_per_100_turns:g}", ""),
        ("candidates", str(result.candidates), "2 per call, scripted"),
        ("bad replies", str(result.bad_replies), "0"),
        ("seconds, first post to all read", f"{result.seconds:g}", "debounce included"),
        ("turns read per second", f"{result.turns_per_s:g}", ""),
    ]
    report_table("extraction", rows, {"result": result.__dict__}, out)
