"""Model-based extraction after turns, on real NATS, Redis and Postgres with a model server speaking the
chat-completions protocol (tests/model_api.py): transcript entries published to a stream of the test's own are
read by `TranscriptTurns`, batched per session in Redis (under a key prefix of the test's own) and extracted by
`ExtractionWorker`, whose candidates land in the test's `on_candidates`."""

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any

import asyncpg
import pytest
from nats.aio.client import Client
from redis.asyncio import Redis

from cairn.consolidation.app import extraction_window
from cairn.consolidation.candidates import Candidate
from cairn.consolidation.extraction_turns import Turn
from cairn.consolidation.extraction_window import ExtractionWindow
from cairn.consolidation.extraction_worker import ExtractionWorker, TranscriptTurns
from cairn.consolidation.settings import ExtractionSettings
from cairn.delivery.settings import NatsSettings
from cairn.delivery.supervision import Health, Restarts, supervise
from cairn.events import TranscriptAppended
from cairn.events.extraction import ExtractionFigures
from cairn.events.routing import incognito_thread_key
from cairn.llm import LlmSettings, Models
from cairn.local import LocalStack
from tests.integration.conftest import eventually, holds_for
from tests.model_api import CallTools, ModelServer, Reply, Status

pytestmark = pytest.mark.integration

CST = timezone(timedelta(hours=8))
SUNDAY = datetime(2026, 12, 6, 10, 0, tzinfo=CST)
SESSION_KEY = "agent:main:main"


def memories(*items: dict[str, Any]) -> CallTools:
    return CallTools(("record_memories", {"memories": list(items)}), prompt_tokens=300, completion_tokens=40)


def plan(original: str, turns: list[int], importance: float = 0.9) -> dict[str, Any]:
    return {"kind": "plan", "text": f"The user said: {original}", "entity": "user", "relation": "trip",
            "importance": importance, "original": original, "turns": turns}  # fmt: skip


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


class Rig:
    """One tenant's turns through a stream, a window and a worker of the test's own."""

    def __init__(self, nc: Client, redis: "Redis", window: ExtractionWindow, subject_root: str) -> None:
        self.nc, self.redis, self.window, self.root = nc, redis, window, subject_root
        self.tenant = str(uuid.uuid4())
        self.found: list[Candidate] = []
        self.position = 0
        self.refusals = 0  # how many hand-overs of candidates fail before they are taken

    async def on_candidates(self, tenant: str, agent: str, candidates: list[Candidate]) -> None:
        assert (tenant, agent) == (self.tenant, "main")
        if self.refusals:
            self.refusals -= 1
            raise RuntimeError("the record store refuses (scripted)")
        self.found.extend(candidates)

    async def say(self, text: str, *, role: str = "user", session_key: str = SESSION_KEY, **fields: Any) -> str:
        self.position += 1
        event = TranscriptAppended(
            tenant_id=self.tenant, session_key=session_key, session_id=fields.pop("session_id", f"s-{session_key}"),
            position=self.position, reset_index=0, message_id=f"m{self.position}", role=role, text=text,
            channel=fields.pop("channel", "web"), chat_type=fields.pop("chat_type", "direct"),
            token_estimate=len(text), occurred_at=fields.pop("occurred_at", SUNDAY), **fields,
        )  # fmt: skip
        await self.nc.jetstream().publish(
            f"{self.root}.{self.tenant}.main.transcript.appended", event.model_dump_json().encode()
        )
        return event.message_id

    async def figures(self) -> ExtractionFigures:
        return await self.window.figures(self.tenant, "main")

    async def reached(self, **at_least: int) -> bool:
        figures = await self.figures()
        return all(getattr(figures, name) >= n for name, n in at_least.items())


@contextlib.asynccontextmanager
async def rig(
    stack: LocalStack, nats_client: Client, pool: "asyncpg.Pool[asyncpg.Record]", llm: LlmSettings, **overrides: Any
) -> AsyncIterator[Rig]:
    tag = uuid.uuid4().hex[:8]
    root, stream = f"xt{tag}", f"TEST_EXTRACT_{tag}"
    js = nats_client.jetstream()
    await js.add_stream(name=stream, subjects=[f"{root}.>"])
    fast = {"debounce_s": 1.0, "poll_s": 0.05, "retry_first_s": 0.3, "retry_cap_s": 1.0}
    settings = ExtractionSettings(**{**fast, "key_prefix": f"test-extract:{tag}", **overrides})
    redis = Redis.from_url(stack.redis_url, socket_timeout=10)  # a lost reply fails the test instead of hanging it
    window = extraction_window(redis, settings)
    made = Rig(nats_client, redis, window, root)
    models = Models(llm, pool)
    turns = TranscriptTurns(js, NatsSettings(url=stack.nats_url), window, settings,
                            where=(f"extract-{tag}", stream, f"{root}.*.*.transcript.appended"))  # fmt: skip
    worker = ExtractionWorker(window, models, settings, made.on_candidates)
    supervised = supervise(worker.run, Health("extraction-worker"), Restarts.default())  # as the service runs it
    tasks = [asyncio.create_task(turns.run()), asyncio.create_task(supervised)]
    try:
        yield made
        for task in tasks:
            assert not task.done(), task  # neither loop crashed
    finally:
        for task in tasks:
            task.cancel()
        async with asyncio.timeout(30):  # a loop that would not stop when cancelled is a failure, not a hang
            await asyncio.gather(*tasks, return_exceptions=True)
        await models.aclose()
        await js.delete_stream(stream)
        await redis.aclose()


def modelled(server: ModelServer) -> LlmSettings:
    return LlmSettings(base_url=server.url, model="test-model")


async def test_ten_turns_within_the_debounce_cost_one_model_call(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    model_server.script(then=memories(plan("下周二我去上海", [1])))
    async with rig(stack, nats_client, app_pool, modelled(model_server), debounce_s=3.0) as r:
        for n in range(10):
            await r.say(f"turn number {n}", role="user" if n % 2 == 0 else "assistant")
        assert await eventually(lambda: r.reached(calls=1, turns=10), within=20)
        assert await holds_for(lambda: asyncio.sleep(0, len(model_server.requests) == 1), seconds=4.0)
        prompt = model_server.requests[0].messages[-1]["content"]
        assert all(f"turn number {n}" in prompt for n in range(10))
        assert model_server.requests[0].tools is not None
        figures = await r.figures()
        assert (figures.calls, figures.turns, figures.pending, figures.candidates) == (1, 10, 0, 1)
        assert (figures.prompt_tokens, figures.completion_tokens) == (300, 40)


async def test_the_hourly_cap_defers_a_sessions_batch_and_keeps_its_turns(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    model_server.script(then=memories())
    async with rig(stack, nats_client, app_pool, modelled(model_server), debounce_s=0.3, calls_per_hour=2) as r:
        for n in range(3):
            await r.say(f"batch {n}")
            expected = {"turns": min(n + 1, 2), "capped": max(0, n - 1)}
            assert await eventually(partial(r.reached, **expected), within=20)
        figures = await r.figures()
        assert (figures.calls, figures.capped, figures.pending, figures.turns) == (2, 1, 1, 2)
        assert len(model_server.requests) == 2
        await r.say("another session", session_key="agent:main:telegram:direct:42")  # its own cap
        assert await eventually(lambda: r.reached(calls=3), within=20)
        assert len(model_server.requests) == 3


async def test_a_garbage_reply_extracts_nothing_is_counted_and_the_next_batch_works(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    model_server.script(
        Reply("Sure! Here are the memories: {kind: plan"),
        memories({"kind": "opinion", "text": "x", "importance": 1}, {"kind": "plan", "importance": "high"}),
        CallTools(("record_memories", "{not json")),
        memories(plan("I fly to Oslo tomorrow", [1])),
    )
    async with rig(stack, nats_client, app_pool, modelled(model_server), debounce_s=0.3) as r:
        for n, text in enumerate(["first", "second", "third"], start=1):
            await r.say(text)
            assert await eventually(partial(r.reached, calls=n), within=20)
        figures = await r.figures()
        assert (figures.bad_replies, figures.candidates, figures.pending) == (2, 0, 0)  # the 2nd read, all dropped
        assert r.found == []
        await r.say("I fly to Oslo tomorrow")
        assert await eventually(lambda: r.reached(candidates=1), within=20)
        assert [c.original for c in r.found] == ["I fly to Oslo tomorrow"]


async def test_a_relative_date_is_resolved_against_when_the_turn_was_said(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    model_server.script(memories(plan("下周二我去上海", [2]), plan("maybe someday", [1], importance=0.1)))
    async with rig(stack, nats_client, app_pool, modelled(model_server), debounce_s=0.5) as r:
        await r.say("你好", occurred_at=SUNDAY - timedelta(days=3))
        said = await r.say("下周二我去上海", occurred_at=SUNDAY)  # a Sunday: next week's Tuesday is two days on
        assert await eventually(lambda: r.reached(calls=1), within=20)
        assert len(r.found) == 1  # the second is under the importance gate
        found = r.found[0]
        assert found.valid_from == datetime(2026, 12, 8, tzinfo=CST)
        assert found.valid_until == datetime(2026, 12, 9, tzinfo=CST)
        assert found.provenance.message_ids == (said,)
        assert found.provenance.occurred_at == SUNDAY
        assert (found.provenance.origin, found.provenance.session_key) == ("owner", SESSION_KEY)
        assert (found.kind, found.entity, found.relation) == ("plan", "user", "trip")


async def test_incognito_cron_heartbeat_and_sub_agent_turns_are_never_extracted(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    model_server.script(then=memories())
    async with rig(stack, nats_client, app_pool, modelled(model_server), debounce_s=0.3) as r:
        await r.say("incognito secret", session_key=incognito_thread_key("main"))
        await r.say("cron output", session_key="cron:nightly", channel="cron")
        await r.say("heartbeat ping", channel="heartbeat")
        await r.say("sub-agent chatter", session_key="agent:main:subagent:7")
        await r.say("a group member speaks", session_key="agent:main:slack:group:g1", chat_type="group")
        assert await eventually(lambda: r.reached(calls=1), within=20)
        assert await holds_for(lambda: asyncio.sleep(0, len(model_server.requests) == 1), seconds=1.5)
        prompt = model_server.requests[0].messages[-1]["content"]
        assert "group member unknown: a group member speaks" in prompt
        assert not any(w in prompt for w in ("incognito", "cron output", "heartbeat", "sub-agent"))
        assert (await r.figures()).turns == 1
        assert not await r.redis.keys(f"{r.window.prefix}:turns:*")


async def test_no_model_extracts_nothing_and_says_so(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    async with rig(stack, nats_client, app_pool, LlmSettings(), debounce_s=0.3) as r:
        for n in range(3):
            await r.say(f"said {n}")
        assert await eventually(lambda: r.reached(no_model=3), within=20)
        figures = await r.figures()
        assert (figures.calls, figures.pending, figures.turns, figures.candidates) == (0, 0, 0, 0)
        assert r.found == []
        assert model_server.requests == []


async def test_while_the_model_is_down_the_batch_waits_and_nothing_is_lost(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    model_server.script(Status(503), Status(502), memories(plan("next Tuesday I fly", [1, 2])))
    async with rig(stack, nats_client, app_pool, modelled(model_server), debounce_s=0.3) as r:
        first = await r.say("next Tuesday I fly")
        second = await r.say("to Oslo", role="assistant")
        assert await eventually(lambda: r.reached(candidates=1), within=30)
        figures = await r.figures()
        assert (figures.retries, figures.calls, figures.turns, figures.pending) == (2, 1, 2, 0)
        assert len(model_server.requests) == 3
        assert all("to Oslo" in q.messages[-1]["content"] for q in model_server.requests)
        assert r.found[0].provenance.message_ids == (first, second)
        assert r.found[0].provenance.origin == "owner"  # an owner's turn with the agent's


async def test_a_batch_held_by_a_replica_that_died_is_taken_over_after_its_lease(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    model_server.script(then=memories(plan("remember the milk", [1])))
    async with rig(stack, nats_client, app_pool, modelled(model_server), debounce_s=3.0, lease_s=2.0) as r:
        dead = extraction_window(r.redis, ExtractionSettings(key_prefix=r.window.prefix, lease_s=2.0))
        await r.say("remember the milk")
        assert await eventually(lambda: r.reached(pending=1), within=20)
        refs = await dead.due(8, now=time.time() + 60)  # it looks ahead, so it claims before the live worker
        held = await dead.claim(refs[0])
        assert held is not None
        assert [t.text for t in held.turns] == ["remember the milk"]
        # the replica dies holding it: the live worker takes it over once the lease has run out
        assert await eventually(lambda: r.reached(calls=1), within=20)
        assert await dead.finish(held, {}) == -1  # no longer its to finish
        figures = await r.figures()
        assert (figures.turns, figures.pending, figures.candidates) == (1, 0, 1)


async def test_a_turn_redelivered_after_its_batch_was_extracted_is_not_extracted_again(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    model_server.script(then=memories())
    async with rig(stack, nats_client, app_pool, modelled(model_server), debounce_s=0.3) as r:
        await r.say("once is enough")
        assert await eventually(lambda: r.reached(calls=1), within=20)
        redelivered = Turn("m1", 1, "user", "once is enough", SUNDAY, SESSION_KEY, f"s-{SESSION_KEY}", "direct")
        assert await r.window.add(r.tenant, "main", [redelivered]) == 0
        assert await holds_for(lambda: asyncio.sleep(0, len(model_server.requests) == 1), seconds=1.5)
        assert (await r.figures()).pending == 0


async def test_candidates_the_record_store_refused_are_extracted_again_after_the_lease(
    stack: LocalStack, nats_client: Client, app_pool: Any, model_server: ModelServer
) -> None:
    model_server.script(then=memories(plan("next Tuesday I fly", [1])))
    async with rig(stack, nats_client, app_pool, modelled(model_server), debounce_s=0.3, lease_s=1.5) as r:
        r.refusals = 1
        said = await r.say("next Tuesday I fly")
        assert await eventually(lambda: r.reached(candidates=1), within=30)
        assert len(model_server.requests) == 2  # the batch was extracted again, not lost
        assert [c.provenance.message_ids for c in r.found] == [(said,)]
        assert (await r.figures()).pending == 0
