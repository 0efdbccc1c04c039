"""JetStream plumbing: stream declaration from `cairn.events.STREAMS`, and idempotent publishing."""

from dataclasses import dataclass

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig, SubjectTransform
from nats.js.errors import APIError, NotFoundError

from cairn.events import STREAMS, StreamSpec
from cairn.events.streams import PARTITION_SOURCE, partition_destination

# JetStream's error codes for a replica count the servers cannot hold: a server that is not clustered (10074), a
# cluster with fewer servers than replicas (10005, "insufficient resources").
_REPLICAS_REFUSED = {10074, 10005}


class StreamReplicasRefused(Exception):
    """The NATS servers cannot keep the asked number of copies of a stream: said in words an operator can act on."""


def stream_config(spec: StreamSpec, replicas: int = 1) -> StreamConfig:
    transform = (
        SubjectTransform(src=PARTITION_SOURCE, dest=partition_destination(spec.partitions)) if spec.partitions else None
    )
    return StreamConfig(
        name=spec.name,
        subjects=list(spec.subjects),
        retention=RetentionPolicy.WORK_QUEUE if spec.work_queue else RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        discard=DiscardPolicy.OLD,
        duplicate_window=spec.duplicate_window_s,
        max_age=spec.max_age_s,
        subject_transform=transform,
        num_replicas=replicas,
        # atomic batches (nats-server 2.12+): the publisher's batches are fsynced once each, not once per message
        allow_atomic=True,
    )


@dataclass(frozen=True)
class DeclaredStream:
    name: str
    replicas_before: int | None  # None: created now


async def ensure_streams(js: JetStreamContext, replicas: int = 1) -> list[DeclaredStream]:
    """Create or update every cairn stream, each kept by `replicas` servers (an existing stream's count is raised or
    lowered to it) and taking atomic batches (an existing stream gains `allow_atomic`); idempotent, called by
    `cairn migrate`."""
    declared = []
    for spec in STREAMS:
        config = stream_config(spec, replicas)
        before: int | None = None
        try:
            try:
                before = (await js.stream_info(spec.name)).config.num_replicas or 1
                await js.update_stream(config)
            except NotFoundError:
                await js.add_stream(config)
        except APIError as error:
            if error.err_code in _REPLICAS_REFUSED:
                raise StreamReplicasRefused(
                    f"NATS refused {replicas} replicas for stream {spec.name} ({error.description}): set "
                    f"CAIRN_NATS_STREAM_REPLICAS to at most the number of clustered NATS servers (1 for a single "
                    f"server)"
                ) from error
            raise
        declared.append(DeclaredStream(spec.name, before))
    return declared


RECONNECT_WAIT_S = 0.5


async def connect(url: str, name: str, attempts: int = -1) -> Client:
    """Services wait for NATS however long it takes (`attempts` -1); a one-shot command gives up."""
    return await nats.connect(url, name=name, max_reconnect_attempts=attempts, reconnect_time_wait=RECONNECT_WAIT_S)


async def streams_exist(js: JetStreamContext) -> bool:
    for spec in STREAMS:
        try:
            await js.stream_info(spec.name)
        except NotFoundError:
            return False
    return True
