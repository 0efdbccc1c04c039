"""`cairn bench load`: generated multi-tenant chat traffic through the public API, in one run:

1. sustained ingest throughput end to end (first request → every message searchable), next to the raw
   baseline (`bench_raw`) on the same rows in the same run;
2. index lag (accepted → visible to search) p50/p99 while the load runs at half that throughput;
3. search latency p50/p99 for a small and for the largest tenant once the index holds 100k and 1M messages
   (`--search-at`); the run keeps posting through the API until it gets there or `--messages` runs out. Since
   session 17 the searches are timed with the lean client (bench_search), not httpx: a yardstick change. Since
   session 18 every run times the same 1,000 queries (`--queries`, their own RNG), not 200 drawn after the fill.
"""

import asyncio
import statistics
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import nats

from cairn.cli.bench_http import Client
from cairn.cli.bench_lag import (
    REQUEST_MESSAGES,
    LagPlan,
    Posting,
    Tally,
    positions,
    postings,
    run_phase,
    short_of_asked,
)
from cairn.cli.bench_raw import raw_throughput
from cairn.cli.bench_search import stall_share, time_searches
from cairn.cli.chatgen import Chat, Traffic, search_queries
from cairn.cli.endpoints import postgres_as
from cairn.events import INGEST_STREAM, SESSION_STREAM

# `--copy-rows`: grow the index past what the API run wrote by copying the rows cairn's indexer wrote for this
# run's tenants (new message ids, times moved back by whole days), so tenant shares and term statistics stay
# those of real traffic. Only the search index grows: transcripts are not copied.
COPY_INDEX_ROWS = """
INSERT INTO indexer.messages (tenant_id, agent_id, message_id, session_key, session_id, position, reset_index, role,
    chat_type, text, terms, occurred_at, ingest_seq, external_id, sender_name)
SELECT tenant_id, agent_id, gen_random_uuid(), session_key, session_id, position, reset_index, role, chat_type, text,
    terms, occurred_at - make_interval(days => $2), ingest_seq, external_id || $3, sender_name
FROM indexer.messages
WHERE tenant_id = ANY($1::uuid[]) AND external_id NOT LIKE '%#copy%'
LIMIT $4
"""
# What autovacuum does to a table before long, done before searches are timed: a service that has stored 1M
# messages vacuumed and analyzed nearly all of them long ago. Right after the bench grew the index (900k rows copied
# in minutes), whether autovacuum's VACUUM of the last copied rows runs alongside the timed searches depends on how
# the copy's timing met autovacuum's (at 100k it did; at 1M in one run not: 79k rows since its last pass, under its
# threshold of a fifth of the table), and a search's first read of a never-vacuumed page writes its hint bits to the
# WAL as a full page (data checksums are on). VACUUM (ANALYZE) puts the table where autovacuum would have, the same
# in every run, and the output says so.
SETTLE = "VACUUM (ANALYZE) indexer.messages"
NOTHING = "zzqxjvw"  # a query that matches nothing: cheap, for read-your-writes checks only
# `quiet` lists the NATS consumers to see when the pipeline is done, and that listing costs the bench client and
# nats-server CPU (~5 ms a round), taken from the pipeline it measures. So the next round comes when the backlog
# could have drained at the earliest: at DRAIN_CEILING messages/s, well above any pipeline here (the raw baseline's
# pull consumer alone drains ~10k/s), never later than POLL_CEILING and never sooner than POLL_FLOOR, which is then
# also how late the end can be seen.
POLL_FLOOR, POLL_CEILING, DRAIN_CEILING = 0.05, 1.0, 20_000.0


@dataclass(frozen=True)
class LoadSettings:
    tenants: int = 1000
    messages: int = 100_000  # posted by this run at most
    throughput_messages: int = 20_000
    batch: int = 20  # messages per request: an adapter posting a tenant's recent messages together
    concurrency: int = 4
    lag_seconds: float = 30.0
    lag_workers: int = 2  # processes posting the lag phase's load (bench_lag)
    lag_batch: int = REQUEST_MESSAGES  # messages per lag-phase request (default: the throughput phase's `batch`)
    search_at: tuple[int, ...] = (100_000, 1_000_000)
    copy_rows: bool = False  # reach search sizes beyond `messages` by copying index rows (labelled in the output)
    # searches timed per tenant and index size. Since session 18: 1,000 from their own RNG (200 before, drawn from
    # the traffic stream after the fill, so each run timed another sample): p99 then rests on the 10 slowest, and
    # 200 queries' p99 moved by 10 ms (p5-p95) with the sample alone (/work/notes/bench31.md)
    queries: int = 1000
    zipf: float = 1.0
    seed: int = 7
    throughput_only: bool = False  # stop after the throughput phase (quick A/B of the ingest path)


@dataclass
class Tenant:
    key: str
    tenant_id: str
    posted: int = 0
    position: int = 0  # the highest position a write of this tenant was given


@dataclass
class LoadRun:
    endpoints: dict[str, str]
    settings: LoadSettings
    ingest: httpx.AsyncClient  # provisioning
    recall: httpx.AsyncClient
    traffic: Traffic
    load: Client  # the load's posts: the lean client (bench_http), its requests encoded before they are timed
    tenants: list[Tenant] = field(default_factory=list)
    posted: int = 0

    def headers(self, rank: int) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tenants[rank].key}"}

    async def provision(self) -> None:
        """Tenants with their agent set to one session per channel peer (the recommended multi-user setting), and
        its visibility ceiling opened to `all`, which the search phase asks for."""
        admin = {"Authorization": f"Bearer {self.endpoints['CAIRN_ADMIN_TOKEN']}"}
        limit = asyncio.Semaphore(8)

        async def create(rank: int) -> Tenant:
            async with limit:
                created = await self.ingest.post("/v1/admin/tenants", json={"name": f"load-{rank}"}, headers=admin)
                body = created.raise_for_status().json()
                tenant = Tenant(body["api_key"], body["tenant_id"])
                config = {"dm_scope": "per-channel-peer", "sessions_visibility": "all"}
                auth = {"Authorization": f"Bearer {tenant.key}"}
                (await self.ingest.put("/v1/agents/main/config", json=config, headers=auth)).raise_for_status()
                return tenant

        self.tenants = list(await asyncio.gather(*(create(r) for r in range(self.settings.tenants))))

    def postings(self, chats: Iterator[Chat]) -> Iterator[Posting]:
        return postings(self.load, tuple(t.key for t in self.tenants), chats)

    async def post(self, posting: Posting) -> list[int]:
        given = positions(await self.load.send(posting.wire))
        tenant = self.tenants[posting.tenant]
        tenant.posted, tenant.position = tenant.posted + len(given), max(tenant.position, *given)
        self.posted += len(given)
        return given

    async def blast(self, load: Iterator[Posting], count: int) -> None:
        """Post `count` messages as fast as the API takes them, `concurrency` requests at a time."""
        left = [count]

        async def worker() -> None:
            while left[0] > 0:
                posting = next(load)
                left[0] -= posting.messages
                await self.post(posting)

        await asyncio.gather(*(worker() for _ in range(self.settings.concurrency)))

    async def quiet(self) -> float:
        """Wait until the session partitions and the indexer hold nothing pending or unacked: every accepted
        message is then applied and searchable (each acks only after its commit). Returns when (perf_counter).

        Session consumers are read before the indexer's: once they are quiet, everything they emit is
        already in the indexer's stream."""
        nc = await nats.connect(self.endpoints["CAIRN_NATS_URL"], name="cairn-bench-load")
        js = nc.jetstream()
        try:
            while True:
                busy = 0
                for stream, prefix in ((INGEST_STREAM, "session-"), (SESSION_STREAM, "indexer")):
                    for info in await js.consumers_info(stream):
                        if info.name.startswith(prefix):
                            busy += (info.num_pending or 0) + (info.num_ack_pending or 0)
                if not busy:
                    return time.perf_counter()
                await asyncio.sleep(next_poll(busy))
        finally:
            await nc.close()

    async def drain(self) -> float:
        """Wait until every tenant's last write is searchable, asked through the public API (read-your-writes);
        returns when that was (perf_counter)."""
        limit = asyncio.Semaphore(16)

        async def caught_up(rank: int) -> None:
            tenant = self.tenants[rank]
            while True:
                async with limit:
                    body = {"query": NOTHING, "consistent_with": str(tenant.position), "visibility": "all"}
                    found = await self.recall.post("/v1/sessions/search", json=body, headers=self.headers(rank))
                if not found.raise_for_status().json()["indexing"]:
                    return

        await asyncio.gather(*(caught_up(r) for r, t in enumerate(self.tenants) if t.position))
        return time.perf_counter()

    async def copy_rows(self, count: int) -> int:
        """Copy `count` index rows of this run's tenants (see COPY_INDEX_ROWS); returns how many were copied."""
        conn = await asyncpg.connect(postgres_as(self.endpoints, "postgres"))
        tenants, copied, round_ = [uuid.UUID(t.tenant_id) for t in self.tenants], 0, 0
        try:
            while copied < count:
                round_ += 1
                status = await conn.execute(COPY_INDEX_ROWS, tenants, round_, f"#copy{round_}", count - copied)
                copied += int(status.split()[-1])
                print(f"  copied {copied:,} of {count:,} index rows", flush=True)
        finally:
            await conn.close()
        return copied

    async def stored(self, rank: int | None = None) -> int:
        """Messages in the full-text index, every tenant's or one's (read as the database superuser, past RLS)."""
        conn = await asyncpg.connect(postgres_as(self.endpoints, "postgres"))
        try:
            if rank is None:
                return int(await conn.fetchval("SELECT count(*) FROM indexer.messages"))
            tenant = uuid.UUID(self.tenants[rank].tenant_id)
            return int(await conn.fetchval("SELECT count(*) FROM indexer.messages WHERE tenant_id = $1", tenant))
        finally:
            await conn.close()

    def small_tenant(self) -> int:
        """The smallest tenant that has said a little (20 messages): the long tail's typical search."""
        return max((r for r, t in enumerate(self.tenants) if t.posted >= 20), default=len(self.tenants) - 1)


def as_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


async def settle(superuser_url: str) -> float:
    """Vacuum and analyze the search index's table as autovacuum would have by now (see SETTLE), as the database
    superuser; returns the seconds it took."""
    conn = await asyncpg.connect(superuser_url)
    try:
        start = time.perf_counter()
        await conn.execute(SETTLE)
        return time.perf_counter() - start
    finally:
        await conn.close()


def percentiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 of at least one sample (a short lag phase may see a single probe)."""
    cuts = statistics.quantiles(samples * 2 if len(samples) == 1 else samples, n=100, method="inclusive")
    return round(cuts[49], 1), round(cuts[98], 1)


def slowest(queries: list[str], times: list[float], count: int = 10) -> list[dict[str, Any]]:
    """The `count` slowest searches (query and ms, slowest first): which queries make a tenant's tail."""
    order = sorted(range(len(queries)), key=lambda i: (-times[i], i))[:count]
    return [{"query": queries[i], "ms": round(times[i], 1)} for i in order]


def raw_rows(run: LoadRun, chats: list[Chat]) -> list[dict[str, str]]:
    """The rows the raw pipeline carries: what cairn stores of each message, keyed the same way."""
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    return [
        {"tenant_id": run.tenants[c.tenant].tenant_id, "message_id": m["message_id"], "role": m["role"],
         "session_key": f"agent:main:{m['channel']}:direct:{m['peer_id']}", "sender_name": m["sender_name"],
         "text": m["text"], "occurred_at": now}
        for c in chats for m in c.messages
    ]  # fmt: skip


def next_poll(busy: int) -> float:
    """Seconds until `quiet` looks again, with `busy` messages pending or unacked (see DRAIN_CEILING)."""
    return min(POLL_CEILING, max(POLL_FLOOR, busy / DRAIN_CEILING))


async def throughput(run: LoadRun) -> dict[str, Any]:
    """The same generated messages through the raw pipeline, then through cairn, end to end."""
    size = run.settings.batch
    chats = [next(run.traffic.requests(size)) for _ in range(run.settings.throughput_messages // size)]
    count = len(chats) * size
    nats_url, postgres = run.endpoints["CAIRN_NATS_URL"], postgres_as(run.endpoints, "postgres")
    rows, load = raw_rows(run, chats), list(run.postings(iter(chats)))  # encoded before the clock starts
    before = await raw_throughput(nats_url, postgres, rows)
    start, cpu = time.perf_counter(), time.process_time()
    await run.blast(iter(load), count)
    accepted = time.perf_counter() - start
    searchable = await run.quiet() - start
    cpu = time.process_time() - cpu  # the bench's own CPU while it measured: posting and watching the consumers
    await run.drain()  # and the public API agrees: every tenant's last write is searchable
    after = await raw_throughput(nats_url, postgres, rows)
    raw, cairn = (before + after) / 2, count / searchable  # raw before and after: the machine's speed drifts
    return {
        "messages": count, "raw_msg_per_s": round(raw, 1), "raw_before_after": [round(before), round(after)],
        "accepted_msg_per_s": round(count / accepted, 1), "end_to_end_msg_per_s": round(cairn, 1),
        "ratio_to_raw": round(cairn / raw, 3), **client_cpu(cpu, count, searchable),
    }  # fmt: skip


async def index_lag(run: LoadRun, rate: float) -> dict[str, Any]:
    """Load at `rate` messages/s in requests of `lag_batch` messages from `lag_workers` processes while a process
    of its own probes accepted → visible to search (see bench_lag). Reports the rate asked, the rate accepted inside
    the window and whether that fell short, so a lag is never read as measured at a rate the client did not reach."""
    ranks = [run.traffic.pick_tenant() for _ in range(int(run.settings.lag_seconds * 8) + 1)]
    probes = [(rank, str(run.traffic.message(rank)["text"])) for rank in ranks]
    plan = LagPlan(run.endpoints, tuple(t.key for t in run.tenants), rate, run.settings.lag_seconds,
                   run.settings.lag_workers, run.settings.seed, run.settings.zipf, run.settings.lag_batch)  # fmt: skip
    lags, tally = await asyncio.to_thread(run_phase, plan, probes)
    for rank, (posted, highest) in tally.tenants.items():
        tenant = run.tenants[rank]
        tenant.posted, tenant.position = tenant.posted + posted, max(tenant.position, highest)
    run.posted += tally.accepted
    return lag_report(rate, run.settings.lag_seconds, lags, tally)


def lag_report(rate: float, seconds: float, lags: list[float], tally: Tally) -> dict[str, Any]:
    """The phase's JSON: the keys of before (rate_msg_per_s is the asked rate) and what tells whether it was met."""
    p50, p99 = percentiles(lags)
    reached = round(tally.accepted_in_window / seconds, 1)
    behind = percentiles(tally.behind_ms) if tally.behind_ms else (0.0, 0.0)
    answer = percentiles(tally.answer_ms) if tally.answer_ms else (0.0, 0.0)
    return {"rate_msg_per_s": round(rate, 1), "asked_msg_per_s": round(rate, 1),
            "sent_in_window_msg_per_s": round(tally.sent / seconds, 1), "accepted_in_window_msg_per_s": reached,
            "accepted_share_of_asked": round(reached / rate, 3) if rate else 0.0,
            "short_of_asked": short_of_asked(rate, reached), "send_behind_schedule_p50_p99_ms": list(behind),
            "load_answer_p50_p99_ms": list(answer),
            **client_cpu(tally.cpu_s, tally.accepted, seconds),
            "probes": len(lags), "lag_p50_ms": p50, "lag_p99_ms": p99}  # fmt: skip


def client_cpu(seconds: float, messages: int, window: float) -> dict[str, float]:
    """The bench client's own CPU over a timed phase, per message and as a share of one core: the measurement's
    overhead, taken from the same cores as the services it measures."""
    return {"client_cpu_s": round(seconds, 2), "client_cpu_ms_per_message": round(1000 * seconds / max(messages, 1), 3),
            "client_cpu_share_of_a_core": round(seconds / window, 3) if window else 0.0}  # fmt: skip


async def search_latency(run: LoadRun, ranks: dict[str, int]) -> dict[str, Any]:
    """Sequential searches, the same generated queries for each tenant and in every run of one seed; client-side time
    of the HTTP call, taken with the lean client (bench_search), and that client's CPU per search."""
    queries = search_queries(run.settings.queries, run.settings.seed)
    result: dict[str, Any] = {}
    reads = Client(run.endpoints["CAIRN_RECALL_URL"])
    try:
        for label, rank in ranks.items():
            timed = await time_searches(reads, queries, run.tenants[rank].key)
            p50, p99 = percentiles(timed.ms)
            result[label] = {"tenant_messages": await run.stored(rank), "p50_ms": p50, "p99_ms": p99,
                             "slowest": slowest(queries, timed.ms), "http_client": "bench_http",
                             "client_cpu_ms_per_search": round(1000 * timed.cpu_s / len(queries), 3),
                             "cpu_stall_share": stall_share(timed.cpu_stall_s, timed.ms)}  # fmt: skip
    finally:
        await reads.aclose()
    return result


async def fill_and_search(run: LoadRun) -> dict[str, Any]:
    """Keep posting through the API until the index holds each `--search-at` count, then time searches."""
    load, found = run.postings(run.traffic.requests(run.settings.batch)), {}
    for target in sorted(run.settings.search_at):
        stored = await run.stored()
        while stored < target and run.posted < run.settings.messages:
            step = min(target - stored, 50_000, run.settings.messages - run.posted)
            await run.blast(load, step)
            await run.quiet()
            stored = await run.stored()
            print(f"  index holds {stored:,} messages", flush=True)
        copied = 0
        if stored < target and run.settings.copy_rows:
            copied = await run.copy_rows(target - stored)
            stored = await run.stored()
        if stored < target:
            found[f"{target}"] = {"reached": False, "stored": stored, "why": "--messages ran out first"}
            continue
        await run.drain()
        settled = await settle(postgres_as(run.endpoints, "postgres"))
        print(f"  {SETTLE} before timing searches, as autovacuum would have by now: {settled:.1f} s", flush=True)
        latency = await search_latency(run, {"small_tenant": run.small_tenant(), "largest_tenant": 0})
        found[f"{target}"] = {"reached": True, "stored": stored, "copied_rows": copied, "settled_s": round(settled, 1),
                              **latency}  # fmt: skip
    return found


async def run_load(endpoints: dict[str, str], settings: LoadSettings) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with (
        httpx.AsyncClient(base_url=endpoints["CAIRN_INGEST_URL"], timeout=120, limits=limits) as ingest,
        httpx.AsyncClient(base_url=endpoints["CAIRN_RECALL_URL"], timeout=120, limits=limits) as recall,
    ):
        traffic, load = Traffic(settings.tenants, settings.seed, settings.zipf), Client(endpoints["CAIRN_INGEST_URL"])
        run = LoadRun(endpoints, settings, ingest, recall, traffic, load)
        try:
            return await phases(run)
        finally:
            await load.aclose()


async def phases(run: LoadRun) -> dict[str, Any]:
    settings = run.settings
    print(f"provisioning {settings.tenants} tenants", flush=True)
    await run.provision()
    await run.quiet()  # their agent configs are applied before anything is timed
    print("throughput: raw baseline, then cairn end to end", flush=True)
    measured = await throughput(run)
    print(f"  {measured}", flush=True)
    if settings.throughput_only:
        return summary(run, measured, {}, {})
    print("index lag at half that throughput", flush=True)
    lag = await index_lag(run, 0.5 * measured["end_to_end_msg_per_s"])
    await run.quiet()
    print(f"  {lag}", flush=True)
    print("search latency as the index grows", flush=True)
    search = await fill_and_search(run)
    return summary(run, measured, lag, search)


def summary(run: LoadRun, measured: dict[str, Any], lag: dict[str, Any], search: dict[str, Any]) -> dict[str, Any]:
    """The run's result; `lag` and `search` are empty when the run stopped after the throughput phase."""
    settings = run.settings
    largest, smallest = run.traffic.weights[0], run.traffic.weights[-1]
    return {
        "benchmark": "load",
        "settings": {**settings.__dict__, "search_at": list(settings.search_at)},
        "tenant_shares": {"largest": round(largest, 4), "smallest": round(smallest, 6)},
        "posted_by_this_run": run.posted,
        "throughput": measured,
        "index_lag": lag,
        "search": search,
    }


def table(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(figure, value, goal) rows for the printed table."""
    put, lag = result["throughput"], result["index_lag"]
    rows = [
        ("raw baseline (NATS → COPY), msg/s, mean of before/after", f"{put['raw_msg_per_s']:,}", ""),
        ("cairn accepted, msg/s", f"{put['accepted_msg_per_s']:,}", ""),
        ("cairn end to end (→ searchable), msg/s", f"{put['end_to_end_msg_per_s']:,}", ""),
        ("cairn / raw", f"{put['ratio_to_raw']:.1%}", "≥ 25%"),
    ]
    if not lag:  # --throughput-only
        return rows
    at = f"{lag['rate_msg_per_s']} msg/s ({result['settings'].get('lag_batch', 5)} per request)"  # before the flag: 5
    rows += [
        (f"index lag p50 at {at}", f"{lag['lag_p50_ms']} ms", ""),
        (f"index lag p99 at {at}", f"{lag['lag_p99_ms']} ms", "< 500 ms"),
        *lag_rate_rows(lag),
    ]
    for target, found in result["search"].items():
        if not found["reached"]:
            rows.append((f"search at {int(target):,} stored", f"not reached ({found['stored']:,})", ""))
            continue
        if found["copied_rows"]:
            rows.append((f"  of the {int(target):,}: copied index rows (--copy-rows)", f"{found['copied_rows']:,}", ""))
        if "settled_s" in found:
            rows.append((f"  then {SETTLE}, as autovacuum would have", f"{found['settled_s']} s", ""))
        for label in ("small_tenant", "largest_tenant"):
            tenant = found[label]
            figure = f"search p50/p99 at {int(target):,}, {label.replace('_', ' ')} ({tenant['tenant_messages']:,})"
            goal = "p99 < 50 ms" if int(target) >= 1_000_000 else ""
            rows.append((figure, f"{tenant['p50_ms']} / {tenant['p99_ms']} ms", goal))
            waited = tenant.get("cpu_stall_share")  # None: no PSI here, or a result written before the key existed
            if waited is not None:
                rows.append(("    meanwhile some task on this machine waited for a CPU", f"{waited:.0%}", ""))
    return rows


def lag_rate_rows(lag: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The lag phase's asked and accepted rates; the goal column flags an accepted rate short of the asked one."""
    asked, reached = lag["rate_msg_per_s"], lag["accepted_in_window_msg_per_s"]
    short = lag.get("short_of_asked", short_of_asked(asked, reached))  # results written before the key existed
    flag = f"SHORT: {reached / asked:.0%} of asked, lag not at this rate" if short else ""
    return [
        ("  lag load asked (half of end to end), msg/s", f"{asked:,}", ""),
        ("  messages accepted in the lag window, msg/s", f"{reached:,}", flag),
    ]
