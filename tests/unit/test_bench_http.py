"""The bench's lean HTTP client: its answers parsed from bytes, and its requests against a real uvicorn on
loopback (httptools, as the services run), one keep-alive connection reused, the server's idle close survived."""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from cairn.cli.bench_http import Client, ProtocolError, StatusError, encode_json, parse_answer
from cairn.cli.bench_lag import positions, postings
from cairn.cli.bench_load import LoadRun, LoadSettings, Tenant, search_latency, table
from cairn.cli.bench_search import WARM_UP, cpu_stall_s, stall_share, time_searches
from cairn.cli.chatgen import Traffic

OK = b'HTTP/1.1 202 Accepted\r\ncontent-length: 11\r\ncontent-type: application/json\r\n\r\n{"a": [1]}\n'


def test_an_answer_is_parsed_once_it_is_complete_and_the_next_one_is_left() -> None:
    assert parse_answer(OK[:20]) is None, "head not complete"
    assert parse_answer(OK[:-3]) is None, "body not complete"
    parsed = parse_answer(OK + OK[:30])
    assert parsed is not None
    answer, used, keep = parsed
    assert (answer.status, answer.json(), used, keep) == (202, {"a": [1]}, len(OK), True)


def test_an_answer_that_closes_or_that_this_client_does_not_speak() -> None:
    closing = OK.replace(b"content-type", b"Connection: close\r\ncontent-type")
    parsed = parse_answer(closing)
    assert parsed is not None
    assert parsed[2] is False, "the server said it closes: the connection is not reused"
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    with pytest.raises(ProtocolError, match="chunked"):
        parse_answer(chunked)
    with pytest.raises(ProtocolError, match="status line"):
        parse_answer(b"SSH-2.0-OpenSSH\r\n\r\n")


def test_the_body_is_the_bytes_httpx_sent_for_json() -> None:
    value = {"messages": [{"text": "张伟 说 deploy 要改到明天 ✓", "role": "user", "n": "1.0"}]}
    assert encode_json(value) == httpx.Request("POST", "http://x/", json=value).content


def _app(seen: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/messages/batch")
    async def batch(request: Request) -> JSONResponse:
        body = await request.json()
        client = request.client
        seen.append({"port": client.port if client else 0, "headers": dict(request.headers), "body": body})
        if request.headers.get("authorization") != "Bearer good":
            return JSONResponse({"title": "unknown API key"}, status_code=401)
        results = [{"position": str(len(seen) * 10 + i)} for i, _ in enumerate(body["messages"])]
        return JSONResponse({"results": results}, status_code=202)

    @app.post("/v1/sessions/search")
    async def search(request: Request) -> JSONResponse:
        client = request.client
        raw = await request.body()
        seen.append({"port": client.port if client else 0, "headers": dict(request.headers), "raw": raw})
        if request.headers.get("authorization") != "Bearer good":
            return JSONResponse({"title": "unknown API key"}, status_code=401)
        return JSONResponse({"results": [], "truncated": False, "indexing": False})

    return app


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    config = uvicorn.Config(_app(seen), host="127.0.0.1", port=0, http="httptools", lifespan="off",
                            log_level="warning", timeout_keep_alive=1)  # fmt: skip
    served = uvicorn.Server(config)
    task = asyncio.create_task(served.serve())
    for _ in range(1000):  # at most 10 s
        if served.started:
            break
        await asyncio.sleep(0.01)
    assert served.started
    port = served.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", seen
    served.should_exit = True
    await task


async def test_posts_reach_a_real_server_as_sent_over_one_kept_connection(
    server: tuple[str, list[dict[str, Any]]],
) -> None:
    url, seen = server
    client = Client(url)
    chats = Traffic(3, seed=5).requests(5)
    load = [next(postings(client, ("good", "good", "good"), chats)) for _ in range(3)]
    given = [positions(await client.send(posting.wire)) for posting in load]
    await client.aclose()
    assert given == [[10, 11, 12, 13, 14], [20, 21, 22, 23, 24], [30, 31, 32, 33, 34]]
    assert len({request["port"] for request in seen}) == 1, "sequential requests reuse one keep-alive connection"
    assert seen[0]["headers"]["authorization"] == "Bearer good"
    assert seen[0]["headers"]["content-type"] == "application/json"
    assert [len(r["body"]["messages"]) for r in seen] == [5, 5, 5]
    same = Traffic(3, seed=5).requests(5)
    assert [r["body"]["messages"] for r in seen] == [next(same).messages for _ in range(3)], "the same traffic"


async def test_concurrent_posts_each_get_their_own_answer(server: tuple[str, list[dict[str, Any]]]) -> None:
    url, seen = server
    client = Client(url)
    bodies = [encode_json({"messages": [{"text": f"m{i}"}] * (i + 1)}) for i in range(12)]
    requests = [client.post("/v1/messages/batch", body, {"Authorization": "Bearer good"}) for body in bodies]
    answers = await asyncio.gather(*(client.send(request) for request in requests))
    await client.aclose()
    assert [len(positions(a)) for a in answers] == list(range(1, 13)), "every answer went to its own request"
    assert len({request["port"] for request in seen}) > 1, "in flight together: more than one connection"


async def test_a_refused_request_raises_with_what_the_server_said(server: tuple[str, list[dict[str, Any]]]) -> None:
    url, _ = server
    client = Client(url)
    answer = await client.send(client.post("/v1/messages/batch", b'{"messages": []}', {"Authorization": "Bearer x"}))
    await client.aclose()
    with pytest.raises(StatusError, match=r"HTTP 401.*unknown API key"):
        positions(answer)


async def test_a_connection_the_server_closed_while_idle_is_not_reused(
    server: tuple[str, list[dict[str, Any]]],
) -> None:
    url, seen = server
    client = Client(url)
    request = client.post("/v1/messages/batch", b'{"messages": [{}]}', {"Authorization": "Bearer good"})
    await client.send(request)
    await asyncio.sleep(1.5)  # past the server's keep-alive timeout of 1 s: it closes the idle connection
    await client.send(request)
    await client.aclose()
    assert len({r["port"] for r in seen}) == 2, "the second request went on a new connection, and was answered"


def test_only_plain_http_urls_are_spoken() -> None:
    with pytest.raises(ValueError, match="only http"):
        Client("https://example.org")


async def test_searches_are_timed_on_one_kept_connection_with_the_bytes_httpx_sent(
    server: tuple[str, list[dict[str, Any]]],
) -> None:
    """The search phase's stopwatch runs the lean client (session 17; httpx before): the same requests on the wire,
    the warm-up untimed, every asked query timed in order."""
    url, seen = server
    client = Client(url)
    queries = [f"张伟 deploy {i}" for i in range(WARM_UP + 5)]
    timed = await time_searches(client, queries, "good")
    await client.aclose()
    assert len(timed.ms) == len(queries)
    assert all(ms > 0 for ms in timed.ms)
    assert timed.cpu_s >= 0
    asked = [*queries[:WARM_UP], *queries]
    sent = [httpx.Request("POST", url, json={"query": q, "visibility": "all"}).content for q in asked]
    assert [r["raw"] for r in seen] == sent, "warm-up first, then every query, bodies byte for byte as httpx's"
    assert {r["headers"]["authorization"] for r in seen} == {"Bearer good"}
    assert len({r["port"] for r in seen}) == 1, "sequential searches reuse one keep-alive connection"
    with pytest.raises(StatusError, match="HTTP 401"):
        await time_searches(Client(url), queries, "bad")


class _SizedRun(LoadRun):
    async def stored(self, rank: int | None = None) -> int:
        return 1000 * (rank or 0) + 7


async def test_the_search_phase_reports_the_lean_clients_times_and_cpu(
    server: tuple[str, list[dict[str, Any]]],
) -> None:
    """The phase's JSON keeps its keys and says which client took the times and its CPU per search."""
    url, seen = server
    async with httpx.AsyncClient() as unused:
        run = _SizedRun({"CAIRN_RECALL_URL": url}, LoadSettings(queries=12), unused, unused, Traffic(3, seed=5),
                        Client(url))  # fmt: skip
        run.tenants = [Tenant("good", "t0"), Tenant("good", "t1")]
        result = await search_latency(run, {"small_tenant": 1, "largest_tenant": 0})
    assert set(result) == {"small_tenant", "largest_tenant"}
    largest = result["largest_tenant"]
    assert {"tenant_messages", "p50_ms", "p99_ms", "slowest"} <= set(largest), "the keys of before are all there"
    assert (largest["tenant_messages"], result["small_tenant"]["tenant_messages"]) == (7, 1007)
    assert largest["http_client"] == "bench_http"
    assert largest["client_cpu_ms_per_search"] >= 0
    assert len(seen) == 2 * (WARM_UP + 12), "each tenant: the warm-up, then the 12 queries"
    share = largest["cpu_stall_share"]
    assert share is None or share >= 0, "how long the machine had a task waiting for a CPU meanwhile (PSI)"
    rows = table({"throughput": {"raw_msg_per_s": 1, "accepted_msg_per_s": 1, "end_to_end_msg_per_s": 1,
                                 "ratio_to_raw": 1.0},
                  "index_lag": {"rate_msg_per_s": 1.0, "lag_p50_ms": 1, "lag_p99_ms": 1,
                                "accepted_in_window_msg_per_s": 1.0},
                  "settings": {}, "search": {"1000000": {"reached": True, "copied_rows": 0, **result}}})  # fmt: skip
    waited = [value for figure, value, _ in rows if "waited for a CPU" in figure]
    shares = [result[label]["cpu_stall_share"] for label in ("small_tenant", "largest_tenant")]
    assert waited == [f"{s:.0%}" for s in shares if s is not None], "printed under each tenant's latency"


def test_cpu_contention_is_read_from_the_kernels_pressure_stall_information(tmp_path: Path) -> None:
    """A latency figure taken while other work kept tasks waiting for the cores is not cairn's alone (bench31: the
    same 200 searches on the same data read p99 38 ms with nothing else running, 89 ms beside ~1.1 busy cores)."""
    pressure = tmp_path / "cpu"
    pressure.write_text("some avg10=21.15 avg60=34.47 avg300=36.62 total=19114115625\n"
                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")  # fmt: skip
    assert cpu_stall_s(pressure) == 19114.115625
    assert cpu_stall_s(tmp_path / "absent") is None, "no PSI (not Linux): nothing is claimed"
    pressure.write_text("")
    assert cpu_stall_s(pressure) is None
    assert stall_share(1.0, [1000.0, 1000.0, 2000.0]) == 0.25, "a second of waiting in four of searching"
    assert stall_share(None, [5.0]) is None
    assert stall_share(0.5, []) is None
