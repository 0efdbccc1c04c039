"""`cairn bench large-batch`: one tenant posts a batch of 1,000 messages of 10 KB each; how long until every one
of them is found word for word, and how long the same tenant's small writes take meanwhile to become
searchable. Word-for-word search must not wait behind the memory index's embeddings of that batch, nor behind
one transaction holding all of it (issue 28's goal: the whole batch searchable within 30 s on this machine).
"""

import random
import string
import time
import uuid
from dataclasses import dataclass

import httpx

from cairn.cli.bench import new_tenant

TEXT_BYTES = 10_000
PROBE_EVERY_S = 0.5


@dataclass(frozen=True)
class LargeBatchResult:
    messages: int
    text_bytes: int
    accepted_s: float
    all_searchable_s: float
    small_writes: int
    small_write_searchable_p50_s: float
    small_write_searchable_max_s: float


def _texts(run: str, count: int) -> list[str]:
    rng = random.Random(7)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(3000)]
    return [(f"big{run}n{i} " + " ".join(rng.choices(words, k=TEXT_BYTES // 4)))[:TEXT_BYTES] for i in range(count)]


def _found(recall: httpx.Client, word: str) -> bool:
    answer = recall.post("/v1/sessions/search", json={"query": word, "limit": 5}, timeout=30)
    answer.raise_for_status()
    return any(word in hit["snippet"] for hit in answer.json()["results"])


def run_large_batch(endpoints: dict[str, str], messages: int, timeout_s: float) -> LargeBatchResult:
    headers = {"Authorization": f"Bearer {new_tenant(endpoints, 'bench-large-batch')}"}
    run = uuid.uuid4().hex[:6]
    batch = [{"channel": "bench", "peer_id": f"p{i % 10}", "text": text, "message_id": f"{run}-{i}"}
             for i, text in enumerate(_texts(run, messages))]  # fmt: skip
    with (
        httpx.Client(base_url=endpoints["CAIRN_INGEST_URL"], headers=headers, timeout=120) as ingest,
        httpx.Client(base_url=endpoints["CAIRN_RECALL_URL"], headers=headers, timeout=30) as recall,
    ):
        start = time.perf_counter()
        answer = ingest.post("/v1/messages/batch", json={"messages": batch})
        answer.raise_for_status()
        accepted = time.perf_counter() - start
        small: dict[str, float] = {}  # the quiet writes: word → when posted
        small_found: dict[str, float] = {}  # word → seconds until searchable
        searchable = float("inf")
        while time.perf_counter() - start < timeout_s and (searchable == float("inf") or len(small_found) < len(small)):
            word = f"small{run}n{len(small)}"
            ingest.post("/v1/messages", json={"channel": "bench", "peer_id": "quiet", "text": f"note {word}",
                                              "message_id": word}).raise_for_status()  # fmt: skip
            small[word] = time.perf_counter()
            for pending in [w for w in small if w not in small_found]:
                if _found(recall, pending):
                    small_found[pending] = time.perf_counter() - small[pending]
            # one session's messages are indexed in order: the last one found means all of them are
            if searchable == float("inf") and _found(recall, f"big{run}n{messages - 1}"):
                searchable = time.perf_counter() - start
            time.sleep(PROBE_EVERY_S)
        # a sample checks that the last one found does mean all
        missing = [i for i in random.Random(3).sample(range(messages), min(20, messages))
                   if not _found(recall, f"big{run}n{i}")]  # fmt: skip
        if missing:
            raise RuntimeError(f"the batch's last message is found, yet messages {missing} are not")
    latencies = sorted(small_found.values()) or [float("inf")]
    return LargeBatchResult(
        messages, TEXT_BYTES, round(accepted, 2), round(searchable, 2), len(small),
        round(latencies[len(latencies) // 2], 2), round(latencies[-1], 2),
    )  # fmt: skip
