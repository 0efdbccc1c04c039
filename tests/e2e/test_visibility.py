"""Session search visibility: self, tree (forks and spawned threads; everything from the main session),
agent and all — applied before the limit, so hidden sessions never take a place in the results."""

from typing import Any

import pytest

from tests.conftest import Tenant


def _keys(tenant: Tenant, caller: str | None, visibility: str, position: str, limit: int = 25) -> set[str]:
    body = {"query": "zebra", "caller_session_key": caller, "visibility": visibility, "limit": limit}
    found = tenant.recall.post("/v1/sessions/search", json={**body, "consistent_with": position})
    assert found.status_code == 200, found.text
    results: list[dict[str, Any]] = found.json()["results"]
    return {r["session_key"] for r in results}


@pytest.mark.e2e
def test_visibility_scopes(tenant: Tenant) -> None:
    # the agent's sessions_visibility is the most a request may see: open it up to all to try every value
    opened = tenant.ingest.put("/v1/agents/main/config", json={"sessions_visibility": "all"})
    assert opened.status_code == 200, opened.text
    a = tenant.ingest.post("/v1/sessions", json={}).json()["session_key"]
    tenant.say("a zebra in thread a", session_key=a, message_id="va")
    b = tenant.ingest.post(f"/v1/sessions/{a}/fork", json={}).json()["session_key"]  # child of a, with a's copy
    tenant.say("a zebra in thread b", session_key=b, message_id="vb")
    c = tenant.ingest.post("/v1/sessions", json={"parent_session_key": b}).json()["session_key"]  # grandchild
    tenant.say("a zebra in thread c", session_key=c, message_id="vc")
    other = tenant.ingest.post("/v1/sessions", json={}).json()["session_key"]
    tenant.say("a zebra elsewhere", session_key=other, message_id="vo")
    helper = tenant.say("a zebra of another agent", agent_id="helper", message_id="vh")
    last = tenant.say("a zebra in main", message_id="vm")
    # read-your-writes is per agent: wait for the helper agent's write with its own position
    assert tenant.search("zebra", consistent_with=helper["position"], agent_id="helper")["indexing"] is False

    assert _keys(tenant, a, "self", last["position"]) == {a}
    assert _keys(tenant, a, "tree", last["position"]) == {a, b, c}
    assert _keys(tenant, b, "tree", last["position"]) == {b, c}
    assert _keys(tenant, a, "agent", last["position"]) == {a, b, c, other, "agent:main:main"}
    assert _keys(tenant, "agent:main:main", "tree", last["position"]) == {a, b, c, other, "agent:main:main"}
    assert "agent:helper:main" in _keys(tenant, a, "all", last["position"])
    assert "agent:helper:main" not in _keys(tenant, a, "agent", last["position"])
    # applied before the limit: the best visible hit comes back even when hidden ones would outrank it
    assert _keys(tenant, c, "self", last["position"], limit=1) == {c}


# The agent's sessions_visibility is the ceiling and a request may only narrow it. Each config value gets its own
# agent, each with its main session, a thread, the thread's fork and another thread, all saying "zebra".
ORDER = ("self", "tree", "agent", "all")
ASKED = (*ORDER, None)  # None: the request leaves visibility out (the ceiling applies)
CALLERS = ("none", "main", "thread")


def _say(tenant: Tenant, agent: str, key: str | None, tag: str) -> str:
    fields = {"session_key": key} if key else {}
    return tenant.say(f"a zebra {tag}", agent_id=agent, message_id=f"{agent}-{tag}", **fields)["position"]


def _agent_with_sessions(tenant: Tenant, ceiling: str) -> dict[str, str]:
    agent = f"v-{ceiling}"
    config = tenant.ingest.put(f"/v1/agents/{agent}/config", json={"sessions_visibility": ceiling,
                                                                   "remember_across_conversations": True})  # fmt: skip
    assert config.status_code == 200, config.text
    thread = tenant.ingest.post("/v1/sessions", json={"agent_id": agent}).json()["session_key"]
    fork = tenant.ingest.post(f"/v1/sessions/{thread}/fork", json={"agent_id": agent}).json()["session_key"]
    other = tenant.ingest.post("/v1/sessions", json={"agent_id": agent}).json()["session_key"]
    _say(tenant, agent, None, "main")
    _say(tenant, agent, thread, "thread")
    _say(tenant, agent, fork, "fork")
    last = _say(tenant, agent, other, "other")
    return {"agent": agent, "main": f"agent:{agent}:main", "thread": thread, "fork": fork, "other": other,
            "last": last}  # fmt: skip


def _expected(
    sessions: dict[str, str], every_agent: set[str], ceiling: str, asked: str | None, caller: str
) -> set[str]:
    """What the caller should see: the narrower of ceiling and request; no caller asks as the main session."""
    visibility = ceiling if asked is None else min(ceiling, asked, key=ORDER.index)
    own = {sessions[k] for k in ("main", "thread", "fork", "other")}
    if visibility == "all":
        return every_agent
    if visibility == "agent" or (visibility == "tree" and caller != "thread"):
        return own
    if visibility == "tree":
        return {sessions["thread"], sessions["fork"]}
    return {sessions["thread"] if caller == "thread" else sessions["main"]}


@pytest.mark.e2e
def test_the_agents_visibility_is_a_ceiling_a_request_only_narrows(tenant: Tenant) -> None:
    agents = {ceiling: _agent_with_sessions(tenant, ceiling) for ceiling in ORDER}
    every = {s[k] for s in agents.values() for k in ("main", "thread", "fork", "other")}
    for sessions in agents.values():  # read-your-writes is per agent
        assert tenant.search("zebra", consistent_with=sessions["last"], agent_id=sessions["agent"])["indexing"] is False
    checked = 0
    for ceiling, sessions in agents.items():
        agent = sessions["agent"]
        for asked in ASKED:
            for caller in CALLERS:
                caller_key = {"none": None, "main": sessions["main"], "thread": sessions["thread"]}[caller]
                expected = _expected(sessions, every, ceiling, asked, caller)
                where = (ceiling, asked, caller)
                body = {"query": "zebra", "agent_id": agent, "caller_session_key": caller_key, "limit": 25}
                if asked is not None:
                    body["visibility"] = asked
                found = tenant.recall.post("/v1/sessions/search", json=body)
                assert found.status_code == 200, found.text
                assert {r["session_key"] for r in found.json()["results"]} == expected, where
                # memory search over transcripts: the agent's own (memory is per agent), never the caller's own
                own = expected & {sessions[k] for k in ("main", "thread", "fork", "other")}
                for corpus in ("sessions", "all"):
                    memory = {**body, "corpus": corpus, "consistent_with": sessions["last"]}
                    hits = tenant.recall.post("/v1/memory/search", json=memory)
                    assert hits.status_code == 200, hits.text
                    keys = {h["session_key"] for h in hits.json()["results"] if h["source"] == "sessions"}
                    assert keys == own - {caller_key}, (*where, corpus)
                # history: every session of the agent, readable exactly when it is in sight
                params = {"agent_id": agent, **({"visibility": asked} if asked else {}),
                          **({"caller_session_key": caller_key} if caller_key else {})}  # fmt: skip
                for name in ("main", "thread", "fork", "other"):
                    read = tenant.recall.get(f"/v1/sessions/{sessions[name]}/history", params=params)
                    assert read.status_code == (200 if sessions[name] in expected else 403), (*where, name, read.text)
                checked += 1
    assert checked == len(ORDER) * len(ASKED) * len(CALLERS)
