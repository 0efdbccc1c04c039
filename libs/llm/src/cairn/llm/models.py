"""What a service holds to ask a model for a tenant: the deployment's default (`CAIRN_LLM_*`) and each tenant's
override (`cairn.tenant_models`, set through ingest's admin API), plus the token accounting of every call."""

import asyncio
import logging
import time

import asyncpg

from cairn.llm.client import ModelClient
from cairn.llm.replies import ChatResult, Usage
from cairn.llm.settings import LlmSettings
from cairn.llm.store import ModelStore

log = logging.getLogger(__name__)

# How long a replica keeps a tenant's resolved model before reading its override again: a PUT or DELETE of an
# override takes effect on every replica within this bound, and a busy tenant costs one lookup per 10 s.
TENANT_CACHE_S = 10.0
CACHE_LIMIT = 10_000  # tenants; the cache starts over rather than grow without bound
CLIENT_LIMIT = 256  # distinct (base_url, model, api_key); beyond, the least recently made client is retired
MAX_PURPOSE_CHARS = 64

ClientKey = tuple[str, str, str | None]


class Models:
    def __init__(
        self, settings: LlmSettings, pool: "asyncpg.Pool[asyncpg.Record]", *, cache_s: float = TENANT_CACHE_S
    ) -> None:
        self.settings = settings
        self.cache_s = cache_s
        self.store = ModelStore(pool)
        self._tenants: dict[str, tuple[float, ClientKey | None]] = {}
        self._clients: dict[ClientKey, ModelClient] = {}
        self._retiring: set[asyncio.Task[None]] = set()

    @property
    def default_key(self) -> ClientKey | None:
        settings = self.settings
        if not (settings.base_url and settings.model):
            return None
        key = settings.api_key.get_secret_value() if settings.api_key else None
        return (settings.base_url, settings.model, key)

    async def for_tenant(self, tenant: str) -> ModelClient | None:
        """The tenant's override, else the deployment's model, else None (no model: the caller's no-model path).
        While Postgres cannot be read, the tenant's last known model is used; with none known, what Postgres
        raised is raised."""
        now = time.monotonic()
        cached = self._tenants.get(tenant)
        if cached is not None and cached[0] > now:
            key = cached[1]
        else:
            try:
                override = await self.store.override(tenant)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
                if cached is None:
                    raise
                log.warning("the model override of tenant %s cannot be read; using the last known", tenant)
                return None if cached[1] is None else self._client(cached[1])
            key = (override.base_url, override.model, override.api_key) if override else self.default_key
            if len(self._tenants) >= CACHE_LIMIT:
                self._tenants.clear()
            self._tenants[tenant] = (now + self.cache_s, key)
        return None if key is None else self._client(key)

    def forget(self, tenant: str) -> None:
        """This replica reads the tenant's override again on its next call (the admin API calls it after a change)."""
        self._tenants.pop(tenant, None)

    def _client(self, key: ClientKey) -> ModelClient:
        client = self._clients.get(key)
        if client is None:
            if len(self._clients) >= CLIENT_LIMIT:
                self._retire(self._clients.pop(next(iter(self._clients))))
            client = ModelClient(key[0], key[1], key[2], timeout_s=self.settings.timeout_s)
            self._clients[key] = client
        return client

    def _retire(self, client: ModelClient) -> None:
        """Closed once any call it may still be serving is over (each is bounded by timeout_s)."""

        async def close_later() -> None:
            await asyncio.sleep(self.settings.timeout_s + 1)
            await client.aclose()

        task = asyncio.get_running_loop().create_task(close_later())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def record_usage(
        self,
        tenant: str,
        purpose: str,
        result_or_usage: ChatResult | Usage | None,
        *,
        failed: bool = False,
        model: str | None = None,
    ) -> None:
        """Counts one call for (tenant, UTC day, purpose, model). `model` defaults to the answer's; a failed call
        (no answer) passes the client's (`model=client.model`) and None or the usage it knows."""
        if isinstance(result_or_usage, ChatResult):
            usage, model = result_or_usage.usage, model or result_or_usage.model
        else:
            usage = result_or_usage or Usage(0, 0)
        await self.store.record_usage(
            tenant,
            purpose[:MAX_PURPOSE_CHARS] or "unknown",
            (model or "unknown")[:200],
            failed=failed,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )

    async def aclose(self) -> None:
        for task in list(self._retiring):
            task.cancel()
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()
