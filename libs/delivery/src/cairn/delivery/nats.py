"""JetStream plumbing: stream declaration from `cairn.events.STREAMS`, and idempotent publishing."""

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig, SubjectTransform
from nats.js.errors import NotFoundError

from cairn.events import STREAMS, StreamSpec
from cairn.events.streams import PARTITION_SOURCE, partition_destination


def stream_config(spec: StreamSpec) -> StreamConfig:
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
    )


async def ensure_streams(js: JetStreamContext) -> list[str]:
    """Create or update every cairn stream; idempotent, called by `cairn migrate`."""
    names = []
    for spec in STREAMS:
        config = stream_config(spec)
        try:
            await js.stream_info(spec.name)
            await js.update_stream(config)
        except NotFoundError:
            await js.add_stream(config)
        names.append(spec.name)
    return names


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
