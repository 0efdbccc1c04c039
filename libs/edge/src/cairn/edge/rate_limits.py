"""Rate limits and quotas at the door (ASGI middleware): a request with a tenant's key is counted against its
tenant's and its key's rate for its class (write, search, recall, admin) in Redis, shared by every replica, and
answered 429 problem+json with Retry-After past either; every counted answer carries `RateLimit-Limit`,
`RateLimit-Remaining` and `RateLimit-Reset` for the tighter of the two. Writes are also held to the tenant's
stored bytes, and memory file writes to its memory documents.

Invalid keys are answered 401 here, so that a client guessing keys is throttled per address before its next key
is looked up, and a key just found invalid is not looked up again for `invalid_key_cache_s`. A valid key costs
no more than before: its address is only checked in Redis once it has sent an invalid key to this process."""

import datetime
import time
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.edge.auth import ApiKeys, bearer_key, hash_key
from cairn.edge.limit_store import LimitStore
from cairn.edge.limits import UNLIMITED_PATHS
from cairn.edge.problems import Problem, problem_response
from cairn.edge.rate_limiter import Bucket, Decision, LimitCounters, RateLimiter, bucket, seconds_to_midnight
from cairn.edge.settings import LimitSettings
from cairn.edge.tenant_limits import EffectiveLimits, RequestClass, adds_document, request_class

# Not counted: health and scrapes (limits.py), the public documents, and the operator's admin API (its token is
# not a tenant's key; a tenant's key there is refused by the route).
UNCOUNTED_PREFIXES = ("/v1/admin/", "/openapi.json", "/docs", "/redoc")
INVALID_KEY = "The API key is not valid (revoked, mistyped or from another deployment)."
FREES_ROOM = ("/v1/erasures",)  # never refused for the stored-bytes quota


@dataclass
class Limits:
    """The limits of one service process: built in the lifespan, kept in `runtime.extras["limits"]`."""

    settings: LimitSettings
    keys: ApiKeys
    store: LimitStore
    limiter: RateLimiter
    counters: LimitCounters
    _invalid: dict[bytes, float] = field(default_factory=dict)
    _suspects: dict[str, float] = field(default_factory=dict)  # addresses that sent an invalid key here lately

    def buckets(self, tenant: str, key_id: str, kind: RequestClass, limits: EffectiveLimits) -> list[Bucket]:
        burst = limits.burst_s
        return [
            bucket(tenant, kind, f"{kind} requests per second of the tenant", limits.requests_per_s.of(kind),
                   burst),
            bucket(tenant, f"{kind}:key:{key_id}", f"{kind} requests per second of this API key",
                   limits.key_requests_per_s.of(kind), burst),
        ]  # fmt: skip

    async def tenant_of(self, secret: str, address: str) -> str | Problem:
        """The key's tenant (resolved and cached by ApiKeys, whose rules for revocation hold), or the 401 or 429
        to answer. A key found invalid moments ago is answered without a lookup; so is any key from an address
        that has sent invalid keys here lately and is past its failures (counted in Redis, across replicas)."""
        digest, now = hash_key(secret), time.monotonic()
        if (until := self._invalid.get(digest)) and until > now:
            self.counters.invalid_key_cache_hits += 1
            return await self._failed(address)
        if (suspect := self._suspects.get(address)) and suspect > now and (throttled := await self.throttled(address)):
            return throttled
        tenant = await self.keys.tenant_for(secret)
        if tenant is not None:
            return tenant
        self.counters.invalid_lookups += 1  # ApiKeys keeps no invalid key: each one was a database round trip
        if len(self._invalid) > 100_000:
            self._invalid.clear()
        if len(self._suspects) > 100_000:
            self._suspects.clear()
        self._invalid[digest] = now + self.settings.invalid_key_cache_s
        self._suspects[address] = now + self.settings.auth_window_s
        return await self._failed(address)

    async def throttled(self, address: str) -> Problem | None:
        """The 429 for an address past its failed logins (counted across replicas), before its key or admin token is
        looked at, or None."""
        failures = await self.limiter.auth_failures(address)
        if failures is not None and failures >= self.settings.auth_failures:
            self.counters.auth_throttled += 1
            return _auth_throttled(self.settings)
        return None

    async def admin_failed(self, address: str, refusal: Problem) -> Problem:
        """A wrong admin token counts as a failed login of its address: `refusal` (the 401), or the 429 once the
        address is past its failures."""
        throttled = await self._failed(address)
        return throttled if throttled.status == 429 else refusal

    async def _failed(self, address: str) -> Problem:
        failures = await self.limiter.fail_auth(address)
        if failures is not None and failures > self.settings.auth_failures:
            self.counters.auth_throttled += 1
            return _auth_throttled(self.settings)
        return Problem(401, INVALID_KEY)

    async def quota_refusal(self, tenant: str, method: str, path: str, limits: EffectiveLimits) -> Problem | None:
        """A write past the tenant's stored bytes, or a memory file write past its documents (as last counted).
        What frees room (a delete, an erasure) is never refused for it."""
        if method == "DELETE" or path.startswith(FREES_ROOM):
            return None
        stored = await self.store.stored(tenant)
        if stored is None:
            return None
        if stored.stored_bytes >= limits.stored_bytes:
            self.counters.refusal("stored_bytes")
            return over_quota("stored_bytes", f"{stored.stored_bytes} bytes stored, the limit is "
                              f"{limits.stored_bytes}: erase some before writing more", 3600)  # fmt: skip
        if adds_document(method, path) and stored.memory_documents >= limits.memory_documents:
            self.counters.refusal("memory_documents")
            return over_quota("memory_documents", f"{stored.memory_documents} memory documents, the limit is "
                              f"{limits.memory_documents}: delete some before adding more", 3600)  # fmt: skip
        return None

    async def take_messages(self, tenant: str, count: int) -> None:
        """Count messages against the tenant's daily quota; raises 429 past it (nothing of the request taken)."""
        limits = await self.store.limits(tenant)
        now = datetime.datetime.now(datetime.UTC)
        taken = await self.limiter.take_messages(tenant, count, limits.messages_per_day, now)
        if taken is None or taken[0]:
            return
        self.counters.refusal("messages_per_day")
        raise over_quota("messages_per_day", f"{taken[1]} of the tenant's {limits.messages_per_day} messages per "
                         f"UTC day are taken; {count} more would pass it", seconds_to_midnight(now))  # fmt: skip


def over_quota(limit: str, detail: str, retry_after_s: int) -> Problem:
    return Problem(429, f"Limit {limit} reached: {detail}.", [{"field": limit, "message": "limit reached"}],
                   headers={"Retry-After": str(retry_after_s)})  # fmt: skip


def _auth_throttled(settings: LimitSettings) -> Problem:
    detail = (f"Too many invalid API keys from this address (over {settings.auth_failures} in "
              f"{settings.auth_window_s:g} s): check the key, and try again later.")  # fmt: skip
    return Problem(429, detail, headers={"Retry-After": str(max(1, round(settings.auth_window_s)))})


def rate_headers(decision: Decision) -> dict[str, str]:
    return {
        "RateLimit-Limit": f"{decision.bucket.per_s:g}",
        "RateLimit-Remaining": str(decision.remaining),
        "RateLimit-Reset": str(decision.reset_s),
    }


def uncounted_headers(per_s: float) -> dict[str, str]:
    """Redis was away: the rate holds, nothing of it is known used."""
    return {"RateLimit-Limit": f"{per_s:g}", "RateLimit-Remaining": str(max(1, int(per_s))), "RateLimit-Reset": "0"}


def _refused(problem: Problem, headers: dict[str, str] | None = None) -> ASGIApp:
    return problem_response(
        problem.status, problem.detail, problem.errors, {**(problem.headers or {}), **(headers or {})}
    )


class RateLimits:
    """ASGI middleware holding each request with a tenant's key to its rates and quotas (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limits: Limits | None = _limits_of(scope)
        path: str = scope.get("path", "")
        if limits is None or path in UNLIMITED_PATHS or path.startswith(UNCOUNTED_PREFIXES):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"}
        secret = bearer_key(headers)
        if secret is None:  # the route answers 401 where a key is needed
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        tenant = await limits.tenant_of(secret, client[0] if client else "unknown")
        if isinstance(tenant, Problem):
            await _refused(tenant)(scope, receive, send)
            return
        method, kind = scope["method"], request_class(scope["method"], path)
        effective = await limits.store.limits(tenant)
        buckets = limits.buckets(tenant, hash_key(secret).hex()[:16], kind, effective)
        decision = await limits.limiter.take(buckets)
        answer = uncounted_headers(effective.requests_per_s.of(kind)) if decision is None else rate_headers(decision)
        if decision is not None and not decision.allowed:
            limits.counters.refusal(f"{kind}_per_s")
            detail = f"Rate limit reached: {decision.bucket.name} is {decision.bucket.per_s:g}; slow down."
            problem = Problem(429, detail, [{"field": f"requests_per_s.{kind}", "message": "limit reached"}],
                              headers={"Retry-After": str(decision.retry_after_s)})  # fmt: skip
            await _refused(problem, answer)(scope, receive, send)
            return
        if kind == "write" and (refusal := await limits.quota_refusal(tenant, method, path, effective)):
            await _refused(refusal, answer)(scope, receive, send)
            return
        await self.app(scope, receive, _with_headers(send, answer))


def _limits_of(scope: Scope) -> "Limits | None":
    app = scope.get("app")
    runtime = getattr(getattr(app, "state", None), "runtime", None)
    limits = None if runtime is None else runtime.extras.get("limits")
    return limits if isinstance(limits, Limits) and limits.settings.enabled else None


def _with_headers(send: Send, headers: dict[str, str]) -> Send:
    encoded = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *encoded]}
        await send(message)

    return sending


async def count_messages(extras: dict[str, object], tenant: str, count: int) -> None:
    """Count messages about to be published against the tenant's daily quota (429 past it); a no-op with limits
    off or nothing to count."""
    limits = extras.get("limits")
    if count and isinstance(limits, Limits) and limits.settings.enabled:
        await limits.take_messages(tenant, count)
