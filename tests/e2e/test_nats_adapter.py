"""Adapters that speak NATS: `cairn.in.<tenant>.message` is validated like `POST /v1/messages`;
what cannot be accepted is dead-lettered with the reason."""

import asyncio
import json
import time
import uuid

import nats
import pytest

from cairn.events import DEAD_LETTER_STREAM, inbound_subject
from cairn.local import LocalStack
from tests.conftest import Tenant
from tests.nats_logins import login_answer
from tests.streams import stream_messages


async def _publish(stack: LocalStack, subject: str, payload: bytes) -> None:
    nc = await nats.connect(stack.nats_url)
    try:
        await nc.jetstream().publish(subject, payload, headers={"Nats-Msg-Id": uuid.uuid4().hex})
    finally:
        await nc.close()


async def _dead_letter_reasons(stack: LocalStack, marker: str) -> list[str]:
    """Reasons of the ingest dead letters whose payload contains `marker`."""
    nc = await nats.connect(stack.nats_url)
    try:
        letters = await stream_messages(nc.jetstream(), DEAD_LETTER_STREAM, "cairn-dead-letter.ingest.*")
    finally:
        await nc.close()
    return [(m.headers or {}).get("Cairn-Error", "") for m in letters if marker.encode() in (m.data or b"")]


def _eventually_dead(stack: LocalStack, marker: str) -> list[str]:
    deadline = time.monotonic() + 20
    reasons = asyncio.run(_dead_letter_reasons(stack, marker))
    while not reasons and time.monotonic() < deadline:
        time.sleep(0.1)
        reasons = asyncio.run(_dead_letter_reasons(stack, marker))
    return reasons


@pytest.mark.e2e
def test_a_message_published_on_nats_is_stored_and_searchable(services: LocalStack, tenant: Tenant) -> None:
    body = {"channel": "slack", "peer_id": "U1", "text": "nats adapter says 你好北京", "message_id": "s-1"}
    asyncio.run(_publish(services, inbound_subject(tenant.tenant_id), json.dumps(body).encode()))
    deadline = time.monotonic() + 20
    hits = tenant.search("北京")["results"]
    while not hits and time.monotonic() < deadline:
        time.sleep(0.1)
        hits = tenant.search("北京")["results"]
    assert isinstance(hits, list)
    assert [h["snippet"] for h in hits] == ["nats adapter says 你好北京"]


@pytest.mark.e2e
def test_invalid_inbound_messages_are_dead_lettered_with_the_reason(services: LocalStack, tenant: Tenant) -> None:
    marker = uuid.uuid4().hex
    invalid = {"text": f"bad chat type {marker}", "chat_type": "telepathy"}
    asyncio.run(_publish(services, inbound_subject(tenant.tenant_id), json.dumps(invalid).encode()))
    reasons = _eventually_dead(services, marker)
    assert len(reasons) == 1
    assert "chat_type" in reasons[0]

    stranger = uuid.uuid4().hex
    unknown_tenant = {"text": f"who am I {stranger}"}
    asyncio.run(_publish(services, inbound_subject(str(uuid.uuid4())), json.dumps(unknown_tenant).encode()))
    reasons = _eventually_dead(services, stranger)
    assert len(reasons) == 1
    assert "no such tenant" in reasons[0]
    assert tenant.search(marker)["results"] == []


async def _dead_letters_from(stack: LocalStack, seqs: set[str]) -> list[tuple[str, bytes]]:
    """(reason, body) of the ingest dead letters of the given inbox sequences."""
    nc = await nats.connect(stack.nats_url)
    try:
        letters = await stream_messages(nc.jetstream(), DEAD_LETTER_STREAM, "cairn-dead-letter.ingest.*")
    finally:
        await nc.close()
    return [
        ((m.headers or {}).get("Cairn-Error", ""), m.data or b"")
        for m in letters
        if (m.headers or {}).get("Cairn-Stream-Seq") in seqs
    ]


@pytest.mark.e2e
def test_incognito_messages_on_nats_are_kept_in_memory_and_never_dead_lettered_with_their_text(
    services: LocalStack, tenant: Tenant
) -> None:
    key = tenant.ingest.post("/v1/sessions", json={"incognito": True}).json()["session_key"]
    body = {"channel": "slack", "text": "incognito over nats", "message_id": "n-1", "session_key": key}
    asyncio.run(_publish(services, inbound_subject(tenant.tenant_id), json.dumps(body).encode()))
    deadline = time.monotonic() + 20
    messages: list[dict[str, object]] = []
    while not messages and time.monotonic() < deadline:
        messages = tenant.recall.get(f"/v1/sessions/{key}/history").json()["messages"]
        time.sleep(0.05)
    assert [(m["text"], m["position"]) for m in messages] == [("incognito over nats", 1)]

    async def publish_to_a_gone_thread() -> str:
        nc = await nats.connect(services.nats_url)
        try:
            gone = {"text": "secret for nobody", "session_key": f"agent:main:dashboard:incognito-{uuid.uuid4()}"}
            ack = await nc.jetstream().publish(inbound_subject(tenant.tenant_id), json.dumps(gone).encode())
            return str(ack.seq)
        finally:
            await nc.close()

    seq = asyncio.run(publish_to_a_gone_thread())
    deadline = time.monotonic() + 20
    letters = asyncio.run(_dead_letters_from(services, {seq}))
    while not letters and time.monotonic() < deadline:
        time.sleep(0.1)
        letters = asyncio.run(_dead_letters_from(services, {seq}))
    assert len(letters) == 1
    reason, data = letters[0]
    assert "incognito" in reason
    assert data == b""
    assert "secret" not in reason


async def _publish_as_adapter(stack: LocalStack, api_key: str, subjects: list[str], payload: bytes) -> list[str]:
    """Log in with a tenant's API key (NATS auth callout answered by ingest), publish to each subject; the errors the
    server reported back (a subject the login may not publish to)."""
    errors: list[str] = []

    async def noted(error: Exception) -> None:
        errors.append(str(error))

    nc = await nats.connect(f"nats://127.0.0.1:{stack.state.ports['nats']}", token=api_key, error_cb=noted)
    try:
        for subject in subjects:
            await nc.publish(subject, payload, headers={"Nats-Msg-Id": uuid.uuid4().hex})
        await nc.flush()
        await asyncio.sleep(0.2)  # a violation comes back asynchronously, after the flush's PONG at the latest
        await nc.flush()
    finally:
        await nc.close()
    return errors


@pytest.mark.e2e
def test_an_adapter_logs_in_to_nats_with_its_api_key_and_writes_only_into_its_own_tenant(
    services: LocalStack, tenant: Tenant, other_tenant: Tenant
) -> None:
    """Issue 31: nobody without a key may publish into a tenant; a tenant's key may publish into its own inbox only."""
    mine, theirs = uuid.uuid4().hex, uuid.uuid4().hex
    ours = {"channel": "slack", "peer_id": "U1", "text": f"adapter login {mine}", "message_id": mine}
    errors = asyncio.run(_publish_as_adapter(services, tenant.api_key, [inbound_subject(tenant.tenant_id)],
                                             json.dumps(ours).encode()))  # fmt: skip
    assert errors == []
    deadline = time.monotonic() + 20
    while not tenant.search(mine)["results"] and time.monotonic() < deadline:
        time.sleep(0.1)
    hits = tenant.search(mine)["results"]
    assert isinstance(hits, list)
    assert [h["snippet"] for h in hits] == [f"adapter login {mine}"]

    forged = {"channel": "slack", "peer_id": "U1", "text": f"forged {theirs}", "message_id": theirs}
    errors = asyncio.run(_publish_as_adapter(services, tenant.api_key, [inbound_subject(other_tenant.tenant_id),
                                             "cairn.dead.letters"], json.dumps(forged).encode()))  # fmt: skip
    assert any("permissions violation" in e.lower() and other_tenant.tenant_id in e for e in errors), errors
    assert any("permissions violation" in e.lower() and "cairn.dead.letters" in e for e in errors), errors
    assert other_tenant.search(theirs)["results"] == []


def _login(stack: LocalStack, token: str | None) -> str:
    return asyncio.run(login_answer(stack.state.ports["nats"], {"auth_token": token} if token else {}))


@pytest.mark.e2e
@pytest.mark.parametrize("token", [None, "ck_not-a-key"], ids=["no key", "an unknown key"])
def test_a_nats_login_without_a_valid_api_key_is_refused(services: LocalStack, token: str | None) -> None:
    assert "Authorization Violation" in _login(services, token)


@pytest.mark.e2e
def test_a_key_that_may_not_write_or_only_some_agents_cannot_log_in_to_nats(
    services: LocalStack, tenant: Tenant
) -> None:
    """A message names its agent inside, where the login cannot see it: only a `write` key for every agent logs in."""
    for body in ({"name": "reader", "scopes": ["read"]}, {"name": "one agent", "scopes": ["write"], "agents": ["a1"]}):
        created = tenant.ingest.post("/v1/keys", json=body)
        assert created.status_code == 201, created.text
        assert "Authorization Violation" in _login(services, created.json()["api_key"])
    writer = tenant.ingest.post("/v1/keys", json={"name": "adapter", "scopes": ["write"]})
    assert writer.status_code == 201, writer.text
    assert _login(services, writer.json()["api_key"]) == "PONG"
