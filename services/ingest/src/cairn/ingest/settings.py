"""Settings of the ingest service (env prefix CAIRN_)."""

from pydantic import Field, SecretStr

from cairn.edge.settings import HttpSettings, http_defaults
from cairn.events.models import MAX_TEXT_CHARS
from cairn.ingest.incognito_store import IncognitoSettings
from cairn.llm import LlmSettings
from cairn.platform.settings import ServiceSettings


class IngestSettings(ServiceSettings):
    http: HttpSettings = Field(default_factory=http_defaults(8081))
    admin_token: SecretStr | None = Field(default=None, description="bearer token of the admin API")
    # The message model's own character limit stays the hard bound: a text of MAX_TEXT_CHARS characters is
    # at most four times as many bytes, so a larger byte limit could never be reached.
    max_text_bytes: int = Field(
        default=64 * 1024, ge=1, le=4 * MAX_TEXT_CHARS, description="largest message text, in UTF-8 bytes"
    )
    agent_config_cache_s: float = Field(
        default=5.0,
        ge=0,
        description="how long a replica routes by a cached agent config when it is not listening for changes "
        "(other replicas' PUTs)",
    )
    agent_config_listen_cache_s: float = Field(
        default=300.0,
        ge=0,
        description="how long a replica that listens for agent config changes keeps a config (a PUT anywhere is "
        "applied at its commit; this only bounds an entry's age)",
    )
    memory_write_wait_s: float = Field(
        default=5.0, ge=0, le=60, description="how long a memory write waits to be applied before answering 202"
    )
    incognito: IncognitoSettings = Field(default_factory=IncognitoSettings)
    session_lookup_wait_s: float = Field(
        default=5.0, ge=0, description="how long a fork waits for the session service to catch up before a 404"
    )
    llm: LlmSettings = Field(default_factory=LlmSettings)  # its allow-list bounds tenants' model overrides
    nats_logins_url: SecretStr | None = Field(
        default=None,
        description="NATS URL of the user that answers adapters' logins (auth callout, adapter_logins.py); unset: "
        "ingest answers none (adapters post over HTTP, or NATS has no callout)",
    )
    nats_issuer_seed: SecretStr | None = Field(
        default=None, description="seed of the account key nats-server trusts for login answers (`SA…`)"
    )
