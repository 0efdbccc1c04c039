"""Generated chat traffic for `cairn bench load`: many tenants of skewed sizes talking in English, Chinese
and both, about people, places, times and the identifiers engineers paste (error codes, versions, files).

Deterministic for a seed; nothing is downloaded. Tenant sizes follow Zipf's law (rank r gets a share
proportional to 1/r^s), the way a hosted service's customers do.
"""

import bisect
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

NAMES = (
    "Alice",
    "Bob",
    "Carmen",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kofi",
    "Lena",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tariq",
    "Uma",
    "Viktor",
    "Wen",
    "Yara",
)
ZH_NAMES = (
    "张伟",
    "王芳",
    "李娜",
    "刘洋",
    "陈静",
    "杨帆",
    "赵磊",
    "黄敏",
    "周杰",
    "吴婷",
    "徐明",
    "孙丽",
    "马超",
    "朱琳",
    "胡斌",
    "郭晶",
    "林涛",
    "何雪",
    "高远",
    "罗佳",
)
PLACES = (
    "Berlin",
    "Lisbon",
    "Toronto",
    "Nairobi",
    "Osaka",
    "Seattle",
    "Madrid",
    "Oslo",
    "Austin",
    "Dublin",
    "Singapore",
    "Melbourne",
    "Prague",
    "Zurich",
    "Bangalore",
    "Denver",
)
ZH_PLACES = (
    "上海",
    "北京",
    "深圳",
    "杭州",
    "成都",
    "广州",
    "南京",
    "武汉",
    "西安",
    "苏州",
    "重庆",
    "厦门",
    "青岛",
    "长沙",
)
TOPICS = (
    "release",
    "budget",
    "invoice",
    "deployment",
    "roadmap",
    "interview",
    "contract",
    "migration",
    "launch",
    "workshop",
    "offsite",
    "quarterly review",
    "customer call",
    "design review",
    "incident",
)
ZH_TOPICS = (
    "发布会",
    "预算",
    "发票",
    "上线",
    "路线图",
    "面试",
    "合同",
    "迁移",
    "产品评审",
    "客户拜访",
    "季度总结",
    "培训",
    "故障复盘",
    "团建",
)
TIMES = ("tomorrow", "next Tuesday", "on Friday", "at 9:30", "this afternoon", "next week", "on the 14th", "tonight")
ZH_TIMES = ("明天", "下周二", "周五", "上午九点半", "今天下午", "下周", "十四号", "今晚", "月底")
ERRORS = (
    "ERR_CONN_RESET",
    "ECONNREFUSED",
    "HTTP 503",
    "E1042",
    "OOMKilled",
    "SIGSEGV",
    "ETIMEDOUT",
    "429 Too Many",
    "NullPointerException",
    "ERR_CERT_EXPIRED",
)
FILES = (
    "config.yaml",
    "main_test.py",
    "docker-compose.yml",
    "schema_v2.sql",
    "README.md",
    "deploy.sh",
    "settings_prod.json",
    "index.ts",
)

EN = (
    "Can we move the {topic} with {name} to {time}?",
    "I'm flying to {place} {time} for the {topic}, back on Sunday.",
    "{name} says the {topic} numbers look fine, but the deploy failed with {error} again.",
    "The build broke after bumping to v{version}; see {file} line {number}.",
    "Reminder: {name}'s birthday is {time}, we are booking a table in {place}.",
    "Ticket {ticket} is still open, {name} thinks it is the {error} from last week.",
    "What did we decide about the {topic}? I remember {name} mentioned {place}.",
    "Pushed a fix for {ticket}: retries on {error} with backoff, {number} ms max.",
    "Summary: {name} owns the {topic}, deadline {time}, budget {number} EUR.",
    "Let me check {file} and get back to you {time}.",
    "Sure, I'll ask {name} about the {topic} in {place}.",
    "The {topic} went well, {name} wants a follow-up {time}.",
)
ZH = (
    "{zh_time}我去{zh_place}参加{zh_topic}，{zh_name}也一起。",
    "{zh_name}说{zh_topic}的材料还没准备好，{zh_time}再对一下。",
    "帮我记一下：{zh_name}的电话换了，{zh_time}之前要确认{zh_topic}。",
    "上次在{zh_place}开的{zh_topic}，结论是预算{number}万。",
    "服务又报{error}了，{zh_name}在查{file}。",
    "我们{zh_time}跟{zh_name}在{zh_place}见面，聊{zh_topic}的事。",
    "工单{ticket}还没关，版本v{version}有问题。",
    "{zh_name}提醒大家{zh_time}交{zh_topic}的总结。",
    "好的，我来安排{zh_place}的{zh_topic}。",
    "昨天{zh_name}去{zh_place}出差了，{zh_topic}推迟到{zh_time}。",
)
MIXED = (
    "{zh_name} 说 {topic} 要改到{zh_time}，ticket {ticket}。",
    "Deploy 到 {zh_place} 机房失败：{error}，看一下 {file}。",
    "{name} 下周去{zh_place}，meeting about the {topic}。",
    "v{version} 的{zh_topic}文档放在 {file} 里了。",
)


def _draw(rng: random.Random, words: tuple[str, ...]) -> str:
    """Some words far more often than others, as in real conversation (a rough Zipf over the list)."""
    return words[min(int(rng.paretovariate(1.2)) - 1, len(words) - 1)] if rng.random() < 0.7 else rng.choice(words)


def sentence(rng: random.Random) -> str:
    templates = rng.choices((EN, ZH, MIXED), weights=(5, 4, 1))[0]
    return rng.choice(templates).format(
        name=_draw(rng, NAMES), zh_name=_draw(rng, ZH_NAMES), place=_draw(rng, PLACES),
        zh_place=_draw(rng, ZH_PLACES), topic=_draw(rng, TOPICS), zh_topic=_draw(rng, ZH_TOPICS),
        time=rng.choice(TIMES), zh_time=rng.choice(ZH_TIMES), error=_draw(rng, ERRORS), file=_draw(rng, FILES),
        version=f"{rng.randint(1, 4)}.{rng.randint(0, 12)}.{rng.randint(0, 30)}", number=rng.randint(2, 4000),
        ticket=f"{rng.choice(('OPS', 'WEB', 'PAY', 'INFRA'))}-{rng.randint(100, 9999)}",
    )  # fmt: skip


def chat_text(rng: random.Random) -> str:
    """One chat message: mostly a sentence, sometimes two or three."""
    return " ".join(sentence(rng) for _ in range(rng.choices((1, 2, 3), weights=(6, 3, 1))[0]))


def zipf_weights(count: int, exponent: float) -> list[float]:
    """Shares of `count` ranks under Zipf's law, largest first, summing to 1."""
    raw = [1 / rank**exponent for rank in range(1, count + 1)]
    total = sum(raw)
    return [w / total for w in raw]


@dataclass(frozen=True)
class Chat:
    """One tenant's request: a few of its messages, posted together as an adapter batches them."""

    tenant: int  # rank: 0 is the largest tenant
    messages: list[dict[str, str]]


class Traffic:
    """An endless, reproducible stream of per-tenant requests, tenants drawn by Zipf share."""

    def __init__(self, tenants: int, seed: int, exponent: float = 1.0, run: str = "load") -> None:
        self.weights = zipf_weights(tenants, exponent)
        self._cumulative = list(itertools.accumulate(self.weights))
        self._rng, self._run = random.Random(seed), run
        self._sent = [0] * tenants
        # big tenants have many conversations at once, small ones one or two
        self._peers = [max(1, round(40 * (w / self.weights[0]) ** 0.5)) for w in self.weights]

    def pick_tenant(self) -> int:
        return min(bisect.bisect_left(self._cumulative, self._rng.random()), len(self.weights) - 1)

    def message(self, tenant: int) -> dict[str, str]:
        rng, number = self._rng, self._sent[tenant]
        self._sent[tenant] += 1
        peer = rng.randrange(self._peers[tenant])
        user = number % 2 == 0
        return {
            "text": chat_text(rng),
            "role": "user" if user else "assistant",
            "message_id": f"{self._run}-{tenant}-{number}",
            "channel": "telegram" if peer % 3 else "slack",
            "peer_id": f"u{peer}",
            "sender_name": rng.choice(NAMES + ZH_NAMES) if user else "assistant",
        }

    def requests(self, size: int) -> Iterator[Chat]:
        while True:
            tenant = self.pick_tenant()
            yield Chat(tenant, [self.message(tenant) for _ in range(size)])


def search_queries(count: int, seed: int) -> list[str]:
    """`count` searches someone would type (a name, a place, a topic, an identifier, or two of them), from an RNG of
    their own: the same seed gives the same queries whatever traffic was posted before them."""
    rng = random.Random(f"queries-{seed}")
    pools = (NAMES, ZH_NAMES, PLACES, ZH_PLACES, TOPICS, ZH_TOPICS, ERRORS, FILES)
    return [" ".join(_draw(rng, rng.choice(pools)) for _ in range(rng.choice((1, 1, 2)))) for _ in range(count)]
