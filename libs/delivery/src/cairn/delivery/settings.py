"""How a service reaches JetStream and how long its exactly-once records are kept."""

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class NatsSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_NATS_", extra="ignore")

    url: str = "nats://127.0.0.1:4222"
    max_deliver: int = Field(default=5, ge=1, description="deliveries before a message is dead-lettered")
    fetch_batch: int = Field(default=64, ge=1)
    # Projections that apply a fetched batch in one transaction (whatever its tenants) take more at a time
    # when there is a backlog: the round trips are per batch. Without a backlog a fetch returns what is there.
    bulk_fetch_batch: int = Field(default=256, ge=1)
    # A fetched batch is applied in slices of at most this many bytes of events, each its own transaction: 256 events
    # of 10 KB in one transaction took minutes on a loaded machine, past the statement timeout (issue 28).
    batch_bytes: int = Field(default=512 * 1024, ge=1024, description="bytes of events applied in one transaction")
    ack_wait_s: float = Field(default=30.0, gt=0)
    # How many NATS servers keep each stream (`cairn migrate` declares it, and raises it on existing streams): one
    # server's loss loses a stream of one replica. JetStream refuses more than one on a server that is not clustered.
    stream_replicas: int = Field(default=1, ge=1, le=5, description="servers that keep a copy of each stream")
    # A batch that fails for a transient reason (faults.py) is held and retried in-process with this backoff.
    retry_first_s: float = Field(default=0.2, gt=0, description="the first wait before a transient failure's retry")
    retry_cap_s: float = Field(default=5.0, gt=0, description="the longest wait between a transient failure's retries")


class ProcessedSettings(BaseSettings):
    """How long the records that make projections exactly-once are kept (cairn.forget_processed:
    platform/schema/R__forget_processed.sql)."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_PROCESSED_", extra="ignore")

    keep_h: float = Field(
        default=168.0,
        ge=1.0,
        description="hours a processed event's record and outbox are kept, for redeliveries and late duplicates",
    )
    sweep_s: float = Field(default=3600.0, gt=0, description="seconds between sweeps of older records")


class SupervisionSettings(BaseSettings):
    """How long-running tasks are restarted, and when readiness and liveness give up on them (supervision.py)."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_SUPERVISION_", extra="ignore")

    restart_first_s: float = Field(default=1.0, gt=0, description="the wait before the first restart of a task")
    restart_cap_s: float = Field(default=30.0, gt=0, description="the longest wait between restarts")
    settle_s: float = Field(default=60.0, gt=0, description="a run this long ends a crash loop")
    give_up_after: int = Field(
        default=5, ge=1, description="crashes in a row (not transient) after which /healthz fails"
    )
    stalled_after_s: float = Field(
        default=10.0, gt=0, description="how long a task may retry a failure before /readyz reports it"
    )
    busy_limit_s: float = Field(
        default=300.0, gt=0, description="how long one piece of work may go without progress before /readyz reports it"
    )
