"""Composition root of the ingest service."""

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError

from cairn.delivery.pull import Consumer
from cairn.ingest import (
    agents_api,
    api,
    audit_api,
    keys_api,
    limits_api,
    memory_api,
    models_api,
    records_api,
    sessions_api,
)
from cairn.ingest.adapter_logins import AdapterLogins
from cairn.ingest.audit import AuditLog
from cairn.ingest.inbox import Inbox
from cairn.ingest.incognito_store import IncognitoThreads
from cairn.ingest.json_body import document_bodies
from cairn.ingest.keys import KeyStore
from cairn.ingest.outcomes import WriteOutcomes
from cairn.ingest.sessions import SessionDirectory
from cairn.ingest.settings import IngestSettings
from cairn.ingest.store import AgentConfigs, TenantStore
from cairn.llm import ModelStore
from cairn.platform.runtime import Runtime, create_service_app, serve


def create_app(settings: IngestSettings) -> FastAPI:
    def wire(runtime: Runtime) -> list[Consumer]:
        configs = AgentConfigs(
            runtime.pool,
            settings.agent_config_cache_s,
            listen_url=settings.postgres.url.get_secret_value(),
            listen_cache_seconds=settings.agent_config_listen_cache_s,
        )
        runtime.extras["tenants"] = TenantStore(runtime.pool)
        runtime.extras["keys"] = KeyStore(runtime.pool)
        runtime.extras["audit"] = AuditLog(runtime.pool)
        runtime.extras["model_store"] = ModelStore(runtime.pool)
        runtime.extras["agent_configs"] = configs
        runtime.extras["write_outcomes"] = WriteOutcomes(runtime.pool)
        runtime.extras["incognito"] = IncognitoThreads(runtime.redis, settings.incognito)
        runtime.extras["sessions"] = SessionDirectory(
            runtime.pool, runtime.publisher.js, settings.session_lookup_wait_s
        )
        consumers: list[Consumer] = [
            Inbox(runtime.pool, runtime.publisher, settings, configs, runtime.extras["incognito"]),
            configs,
        ]
        if settings.nats_logins_url is not None and settings.nats_issuer_seed is not None:
            logins_url, seed = settings.nats_logins_url.get_secret_value(), settings.nats_issuer_seed.get_secret_value()
            consumers.append(AdapterLogins(logins_url, seed, runtime.extras["api_keys"]))
        return consumers

    app = create_service_app(
        "ingest",
        settings,
        routers=[
            api.router,
            sessions_api.router,
            agents_api.router,
            memory_api.router,
            records_api.router,
            models_api.router,
            keys_api.admin,
            keys_api.own,
            audit_api.router,
            limits_api.router,
        ],
        wire=wire,
        description="The write door: messages, session commands, agent configs, memory writes, admin.",
    )
    app.add_exception_handler(RequestValidationError, api.on_validation_error)
    document_bodies(app, [api.batch_body])
    return app


def main() -> None:
    settings = IngestSettings()
    serve(create_app(settings), settings)
