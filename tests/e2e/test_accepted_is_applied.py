"""Issue 28, "anything that is accepted must be storable and indexable": requests generated from ingest's own
OpenAPI document (schemathesis, valid data only, a fixed seed) are sent to the running stack, and whatever is
answered 202/200 must then be applied by every consumer that takes it:

- a message (`POST /v1/messages`, each item of `POST /v1/messages/batch`) is in its session's history with the
  same text, role, sender, adapter id and time (the session service), is found by session search once the index
  reached its position (the indexer), and the memory index has chunked its session (nothing left pending);
- an agent config (`PUT /v1/agents/{agent_id}/config`) is read back as sent with the defaults filled in, the
  session service stored that version's settings, the memory index that version's `remember`, and a direct
  message for the agent afterwards is routed by its `dm_scope` and identity links into that session's history;
- a memory write (`PUT /v1/memory/files/{path}`, `POST /v1/memory/daily`) leaves each document as the accepted
  writes, replayed in order, make it (a retry with a used Idempotency-Key writes nothing), at the version last
  answered, and the memory index has nothing pending;
- and the tenant has no dead letter in any consumer (`GET /v1/memory/status`).

A 4xx is a fine answer (counted and printed), a 5xx fails. The generator chooses every value; where one is fixed
below, its comment says why the check needs it."""

import asyncio
import json
import os
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any
from urllib.parse import quote, unquote

import asyncpg
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import Case

from cairn.consolidation.domain import appended
from cairn.events import AgentConfig, InboundMessage
from cairn.events.routing import is_incognito, is_reset_command, routing_config, session_key_for
from cairn.indexer.store import SEARCHABLE_ROLES
from cairn.local import LocalStack
from cairn.memindex.transcripts import remembers
from cairn.recall.history import cap_text
from cairn.text import build_query, redact
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e
AnyCase = Case[Any]
SEED = int(os.environ.get("CAIRN_FUZZ_SEED", "28"))
# Generated requests per operation: enough to reach the schema's corners, few enough for ~a minute in all.
MESSAGES = int(os.environ.get("CAIRN_APPLIED_MESSAGES", "120"))
BATCHES = int(os.environ.get("CAIRN_APPLIED_BATCHES", "60"))
DOCUMENTS = int(os.environ.get("CAIRN_APPLIED_DOCUMENTS", "60"))
CONFIGS = int(os.environ.get("CAIRN_APPLIED_CONFIGS", "100"))
# Bounds of the waits for the consumers (the stack's own read-your-writes bound is 5 s per request).
APPLIED_WITHIN_S = 60.0
HISTORY_PAGE = 200
SEARCH_PAGE, SEARCH_MAX_OFFSET = 25, 475
SEARCH_QUERY_CHARS = 4096
# The peer a behaviour check's direct message comes from: a config's identity links may name it.
PROBE_CHANNEL, PROBE_PEER = "api", "probe-peer"


def _ingest_schema(stack: LocalStack) -> schemathesis.BaseSchema:
    config = schemathesis.Config.from_dict(
        {"seed": SEED, "generation": {"mode": "positive", "deterministic": True, "database": "none"}}
    )
    return schemathesis.openapi.from_url(f"{stack.url('ingest')}/openapi.json", config=config, timeout=10)


def generated(schema: schemathesis.BaseSchema, method: str, path: str, examples: int) -> list[AnyCase]:
    """`examples` valid requests of one operation as its schema describes them, the same on every run."""
    cases: list[AnyCase] = []

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=schema[path][method].as_strategy())
    def collect(case: AnyCase) -> None:
        cases.append(case)

    collect()
    return cases


def send(client: httpx.Client, case: AnyCase) -> httpx.Response:
    """The case as generated (its own headers, If-Match included), with the tenant's key; the body as raw JSON
    so that whatever string the generator drew reaches the server."""
    headers = {**dict(case.headers or {}), "Content-Type": "application/json"}
    headers.pop("Authorization", None)
    content = None if case.body is None else json.dumps(case.body).encode()
    return client.request(case.method, case.formatted_path, content=content, headers=headers, params=case.query)


@dataclass
class Answers:
    """Statuses seen, by operation; a 5xx is kept with its request to be shown."""

    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    refusals: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def record(self, operation: str, case: AnyCase, response: httpx.Response) -> None:
        self.statuses[(operation, response.status_code)] += 1
        if 400 <= response.status_code < 500:
            for error in response.json().get("errors") or [{"field": None, "message": response.text[:80]}]:
                self.refusals[(operation, str(error["field"]), str(error["message"])[:60])] += 1
        if response.status_code >= 500:
            self.server_errors.append(f"{operation} {case.body!r} -> {response.status_code} {response.text[:300]}")

    def record_item(self, result: dict[str, Any]) -> None:
        """One item's result in a batch answered 202."""
        error = result.get("error", {})
        self.statuses[("batch item", error.get("status", 202))] += 1
        for refusal in error.get("errors", []):
            self.refusals[("batch item", str(refusal["field"]), str(refusal["message"])[:60])] += 1

    def refused(self) -> str:
        """What was refused most, by field: what the document does not say of a field."""
        by_field = Counter[tuple[str, str]]()
        for (_, name, message), n in self.refusals.items():
            by_field[(name, message.split(" at character")[0].split(" (U+")[0])] += n
        return "; ".join(f"{name}: {message} ({n})" for (name, message), n in by_field.most_common(8))

    def report(self) -> str:
        return ", ".join(f"{op} {status}: {n}" for (op, status), n in sorted(self.statuses.items()))


@dataclass(frozen=True)
class Kept:
    """A message answered 202 and what its transcript entry must show."""

    message: InboundMessage
    session_key: str
    position: int


def _session_path(key: str) -> str:
    # every character escaped, dots too: `..` must reach the server as a key, not be resolved by the client
    return "/v1/sessions/" + quote(key, safe="").replace(".", "%2E") + "/history"


def eventually(probe: Callable[[], Any], timeout: float = APPLIED_WITHIN_S) -> Any:
    deadline = time.monotonic() + timeout
    found = probe()
    while not found and time.monotonic() < deadline:
        time.sleep(0.2)
        found = probe()
    return found


def _history(tenant: Tenant, agent: str, key: str, position: int) -> list[dict[str, Any]]:
    """Every message of the session's latest window, once the index reached `position` (bounded)."""
    messages: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        params: dict[str, Any] = {"agent_id": agent, "limit": HISTORY_PAGE, "offset": offset, "include_tools": "true"}
        if offset == 0 and not is_incognito(key):
            params["consistent_with"] = str(position)
        page = eventually(partial(_page, tenant, key, params))
        assert page, f"session {key!r} of agent {agent!r} never reached position {position}"
        messages += page["messages"]
        offset = page["next_offset"] if page["has_more"] else None
    return messages


def _page(tenant: Tenant, key: str, params: dict[str, Any]) -> dict[str, Any] | None:
    return _caught_up(tenant.recall.get(_session_path(key), params=params))


def _caught_up(response: httpx.Response) -> dict[str, Any] | None:
    if response.status_code == 404:
        return None  # the session service has not created the session yet
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return None if body.get("indexing") else body


def _entry_for(kept: Kept, history: list[dict[str, Any]], used: set[str]) -> dict[str, Any] | None:
    """The history entry showing `kept`: same role, adapter id, sender (as redacted for reading) and text (as
    capped and redacted for reading), and the same instant when one was sent."""
    msg = kept.message
    text, _ = cap_text(msg.text)
    sender = redact(msg.sender_name) if msg.sender_name is not None else None
    for entry in history:
        if entry["cairn_message_id"] in used:
            continue
        if (entry["role"], entry["external_id"], entry["sender_name"]) != (msg.role, msg.message_id, sender):
            continue
        if entry["text"] != text and not (entry["truncated"] and text.startswith(entry["text"][:100])):
            continue
        if (
            msg.occurred_at is not None
            and InboundMessage.model_validate({"text": "x", "occurred_at": entry["occurred_at"]}).occurred_at
            != msg.occurred_at
        ):
            continue
        used.add(entry["cairn_message_id"])
        return entry
    return None


def _found_by_search(tenant: Tenant, kept: Kept, cairn_id: str) -> bool:
    """Session search for the message's own text, scoped to its session, pages until it shows `cairn_id`."""
    offset = 0
    while offset <= SEARCH_MAX_OFFSET:
        body = {
            "agent_id": kept.message.agent_id,
            "query": kept.message.text,
            "visibility": "self",
            "caller_session_key": kept.session_key,
            "limit": SEARCH_PAGE,
            "offset": offset,
            "consistent_with": str(kept.position),
        }
        response = tenant.recall.post("/v1/sessions/search", json=body)
        assert response.status_code == 200, response.text
        hits = response.json()["results"]
        if any(hit["cairn_message_id"] == cairn_id for hit in hits):
            return True
        if not hits:
            return False
        offset += len(hits)
    return False


def _memory_status(tenant: Tenant, agent: str) -> dict[str, Any]:
    response = tenant.recall.get("/v1/memory/status", params={"agent_id": agent})
    assert response.status_code == 200, response.text
    status: dict[str, Any] = response.json()
    return status


def _no_dead_letters(tenant: Tenant, agents: set[str], documents: bool = False) -> None:
    """The memory index has nothing pending for any agent (it has applied what it took), and no consumer
    dead-lettered anything of the tenant."""
    for agent in sorted(agents):
        assert eventually(partial(_nothing_pending, tenant, agent, documents)), f"{agent!r}: memory index pending"
    counted = eventually(partial(_counted_dead_letters, tenant))
    assert counted, "the dead letters could not be counted"
    assert counted[0] == {}, counted[0]


def _nothing_pending(tenant: Tenant, agent: str, documents: bool) -> bool:
    pending = _memory_status(tenant, agent)["pending"]
    return bool(pending["sessions"] == 0 and (not documents or pending["documents"] == 0))


def _counted_dead_letters(tenant: Tenant) -> tuple[dict[str, int]] | None:
    """The counts per consumer once NATS answered them (in a tuple: none at all is an answer too)."""
    counts: dict[str, int] | None = _memory_status(tenant, "main")["dead_letters"]
    return None if counts is None else (counts,)


@dataclass
class Ledger:
    """The messages answered 202 that a transcript must show, by the session they were answered with."""

    kept: list[Kept] = field(default_factory=list)
    first_of: dict[tuple[str, str], Kept] = field(default_factory=dict)  # (channel, adapter id): stored as
    reset_at: dict[tuple[str, str], int] = field(default_factory=dict)  # (agent, key): its last reset command
    misanswered: list[tuple[Kept, dict[str, Any]]] = field(default_factory=list)  # re-sends answered elsewhere

    def keep(self, raw: Any, answer: dict[str, Any]) -> None:
        item = Kept(InboundMessage.model_validate(raw), answer["session_key"], int(answer["position"]))
        msg = item.message
        if is_reset_command(msg):  # a reset, not a message: nothing to find in the transcript
            self.reset_at[(msg.agent_id, item.session_key)] = item.position
        elif msg.message_id is not None and (msg.channel, msg.message_id) in self.first_of:
            # a re-send of a stored message (same channel and id): stored once, as first sent, and answered so
            first = self.first_of[(msg.channel, msg.message_id)]
            if (answer["session_key"], int(answer["position"])) != (first.session_key, first.position):
                self.misanswered.append((first, answer))
        else:
            self.kept.append(item)
            if msg.message_id is not None:
                self.first_of[(msg.channel, msg.message_id)] = item

    def by_session(self) -> dict[tuple[str, str], list[Kept]]:
        sessions: dict[tuple[str, str], list[Kept]] = defaultdict(list)
        for item in self.kept:
            sessions[(item.message.agent_id, item.session_key)].append(item)
        return sessions


def _send_messages(tenant: Tenant, schema: schemathesis.BaseSchema, answers: Answers) -> Ledger:
    ledger = Ledger()
    for case in generated(schema, "POST", "/v1/messages", MESSAGES):
        response = send(tenant.ingest, case)
        answers.record("message", case, response)
        if response.status_code == 202:
            ledger.keep(case.body, response.json())
    for case in generated(schema, "POST", "/v1/messages/batch", BATCHES):
        response = send(tenant.ingest, case)
        answers.record("batch", case, response)
        if response.status_code != 202:
            continue
        items = case.body["messages"] if isinstance(case.body, dict) else None
        assert isinstance(items, list), case.body
        for raw, result in zip(items, response.json()["results"], strict=True):
            answers.record_item(result)
            if "error" not in result:
                ledger.keep(raw, result)
    return ledger


def _searchable(item: Kept) -> bool:
    """Whether session search is meant to find the message by its own text."""
    msg = item.message
    return (
        not is_incognito(item.session_key)  # held in memory only: never indexed
        and msg.role in SEARCHABLE_ROLES  # tool output and system text are kept in the transcript, never searched
        and len(msg.text) <= SEARCH_QUERY_CHARS  # no longer than a query may be
        and build_query(msg.text) is not None  # a word to search for
    )


@dataclass
class Findings:
    missing: list[Kept] = field(default_factory=list)  # not in its session's history
    unsearched: list[Kept] = field(default_factory=list)  # in history, not found by search
    searched: int = 0


def _check_session(tenant: Tenant, items: list[Kept], reset_at: int, findings: Findings) -> None:
    agent, key = items[0].message.agent_id, items[0].session_key
    history = _history(tenant, agent, key, max(i.position for i in items))
    used: set[str] = set()
    for item in sorted(items, key=lambda i: i.position):
        if item.position < reset_at:
            continue  # in a window closed by a reset command (rare): the latest window is what is read here
        entry = _entry_for(item, history, used)
        if entry is None:
            findings.missing.append(item)
        elif not _searchable(item):
            continue
        elif _found_by_search(tenant, item, entry["cairn_message_id"]):
            findings.searched += 1
        else:
            findings.unsearched.append(item)


def test_every_accepted_message_is_in_its_transcript_and_found_by_search(services: LocalStack, tenant: Tenant) -> None:
    answers = Answers()
    ledger = _send_messages(tenant, _ingest_schema(services), answers)
    print(f"\nanswers: {answers.report()}; messages to find: {len(ledger.kept)}\nrefused: {answers.refused()}")
    assert not answers.server_errors, answers.server_errors
    assert not ledger.misanswered, ledger.misanswered
    assert len(ledger.kept) >= MESSAGES // 2, f"too few accepted to show anything: {answers.report()}"

    findings = Findings()
    for (agent, key), items in ledger.by_session().items():
        _check_session(tenant, items, ledger.reset_at.get((agent, key), 0), findings)
    print(f"found in history: {len(ledger.kept) - len(findings.missing)}; found by search: {findings.searched}")
    assert not findings.missing, [(m.session_key, m.message) for m in findings.missing]
    assert not findings.unsearched, [(m.session_key, m.message.text) for m in findings.unsearched]
    _no_dead_letters(tenant, {agent for agent, _ in ledger.by_session()})


async def _applied_settings(stack: LocalStack, tenant_id: str, agent: str) -> dict[str, Any]:
    """What the session service and the memory index stored of the agent's config (empty when nothing yet)."""
    conn = await asyncpg.connect(stack.postgres_url("postgres"))
    try:
        session = await conn.fetchrow(
            "SELECT * FROM session.agent_settings WHERE tenant_id = $1 AND agent_id = $2", uuid.UUID(tenant_id), agent
        )
        memory = await conn.fetchrow(
            "SELECT * FROM indexer.memory_agents WHERE tenant_id = $1 AND agent_id = $2", uuid.UUID(tenant_id), agent
        )
    finally:
        await conn.close()
    return {"session": dict(session) if session else None, "memory": dict(memory) if memory else None}


def _days(days: float | None) -> timedelta | None:
    return None if days is None else timedelta(days=days)


def _session_view(stored: dict[str, Any]) -> dict[str, Any]:
    """What the session service keeps of a config (its JSON columns read back)."""
    view = {name: stored[name] for name in ("context_window", "dormant_after", "archive_after")}
    return view | {name: json.loads(stored[name]) for name in ("reset_policy", "reset_by_type", "compaction")}


def _expected_session_view(config: AgentConfig) -> dict[str, Any]:
    return {
        "context_window": config.context_window,
        "dormant_after": _days(config.retention.dormant_after_days),
        "archive_after": _days(config.retention.archive_after_days),
        "reset_policy": config.reset.model_dump(mode="json"),
        "reset_by_type": {kind: rule.model_dump(mode="json") for kind, rule in config.reset_policies().items()},
        "compaction": config.compaction.model_dump(mode="json"),
    }


def test_every_accepted_agent_config_is_applied_by_each_consumer(services: LocalStack, tenant: Tenant) -> None:
    schema, answers = _ingest_schema(services), Answers()
    latest: dict[str, tuple[int, AgentConfig]] = {}  # agent: the version and config last answered 200
    for case in generated(schema, "PUT", "/v1/agents/{agent_id}/config", CONFIGS):
        response = send(tenant.ingest, case)
        answers.record("config", case, response)
        if response.status_code != 200:
            continue
        effective = AgentConfig.model_validate(case.body)
        assert response.json() == effective.model_dump(mode="json"), "the answer is the effective config"
        version = int(response.headers["ETag"].strip('"'))
        latest[unquote(case.path_parameters["agent_id"])] = (version, effective)  # as sent: quoted
    print(f"\nanswers: {answers.report()}; agents configured: {len(latest)}\nrefused: {answers.refused()}")
    assert not answers.server_errors, answers.server_errors
    assert len(latest) >= 5, f"too few accepted to show anything: {answers.report()}"

    for agent, (version, config) in latest.items():
        read = tenant.ingest.get(f"/v1/agents/{agent}/config")
        assert read.status_code == 200, read.text
        assert (read.json(), read.headers["ETag"]) == (config.model_dump(mode="json"), f'"{version}"'), agent

        def applied(agent: str = agent, version: int = version) -> dict[str, Any] | None:
            stored = asyncio.run(_applied_settings(services, tenant.tenant_id, agent))
            done = all(s is not None and s["config_version"] == version for s in stored.values())
            return stored if done else None

        stored = eventually(applied)
        assert stored, f"agent {agent!r}: version {version} not applied by every consumer: {applied()}"
        assert _session_view(stored["session"]) == _expected_session_view(config), agent
        assert stored["memory"]["remember"] == remembers(config), (agent, stored["memory"], config)

        # the config at work: a direct message from a peer is routed by dm_scope and identity links
        probe = {"agent_id": agent, "channel": PROBE_CHANNEL, "peer_id": PROBE_PEER, "text": f"probe of {agent}"}
        answer = tenant.say(**probe)
        expected_key = session_key_for(InboundMessage.model_validate(probe), routing_config(config))
        assert answer["session_key"] == expected_key, (config.dm_scope, config.identity_links)
        history = _history(tenant, agent, expected_key, int(answer["position"]))
        assert [m["text"] for m in history] == [probe["text"]], history
    _no_dead_letters(tenant, set(latest))


@dataclass
class Documents:
    """The documents every accepted write should have made, replayed in the order the writes were answered."""

    text: dict[tuple[str, str], str] = field(default_factory=dict)  # (agent, path): its text
    version: dict[tuple[str, str], int | None] = field(default_factory=dict)  # as last answered; None: pending
    keys: set[str] = field(default_factory=set)  # Idempotency-Keys of accepted writes

    def written(self, case: AnyCase, path: str, mode: str, answer: httpx.Response) -> None:
        assert isinstance(case.body, dict)
        key = (str(case.body.get("agent_id", "main")), path)
        idempotency_key = case.headers.get("Idempotency-Key") if case.headers else None
        if idempotency_key is not None and idempotency_key in self.keys:
            assert answer.json()["path"] == path, "a retry is answered for its own document"
            return  # a retry of an accepted write (a different one would be a 422): written once
        if idempotency_key is not None:
            self.keys.add(idempotency_key)
        text = str(case.body["text"])
        self.text[key] = text if mode == "put" else appended(self.text.get(key, ""), text)
        self.version[key] = answer.json()["version"]


def _document(tenant: Tenant, agent: str, path: str) -> httpx.Response:
    markdown = {"Accept": "text/markdown"}  # the whole document as stored
    return tenant.recall.get(f"/v1/memory/files/{quote(path)}", params={"agent_id": agent}, headers=markdown)


def _send_writes(tenant: Tenant, schema: schemathesis.BaseSchema, answers: Answers) -> Documents:
    documents = Documents()
    for case in generated(schema, "PUT", "/v1/memory/files/{path}", DOCUMENTS):
        response = send(tenant.ingest, case)
        answers.record("file", case, response)
        if response.status_code in (200, 201, 202):
            documents.written(case, unquote(case.path_parameters["path"]), "put", response)
    for case in generated(schema, "POST", "/v1/memory/daily", DOCUMENTS):
        response = send(tenant.ingest, case)
        answers.record("daily", case, response)
        if response.status_code in (200, 201, 202):
            documents.written(case, response.json()["path"], "append", response)
    return documents


def test_every_accepted_memory_write_is_in_its_document_and_indexed(services: LocalStack, tenant: Tenant) -> None:
    answers = Answers()
    documents = _send_writes(tenant, _ingest_schema(services), answers)
    print(f"\nanswers: {answers.report()}; documents: {len(documents.text)}\nrefused: {answers.refused()}")
    assert not answers.server_errors, answers.server_errors
    assert len(documents.text) >= 5, f"too few accepted to show anything: {answers.report()}"

    for (agent, path), text in documents.text.items():
        version = documents.version[(agent, path)]

        def stored(agent: str = agent, path: str = path, text: str = text, version: int | None = version) -> bool:
            read = _document(tenant, agent, path)
            shown = text == "" and read.status_code == 404  # an empty document reads as none (see below)
            etag = None if version is None else f'"{version}"'
            return shown or (read.status_code == 200 and read.text == text and etag in (None, read.headers["ETag"]))

        assert eventually(stored), (agent, path, text, version, _document(tenant, agent, path).text[:300])
    _no_dead_letters(tenant, {agent for agent, _ in documents.text}, documents=True)
