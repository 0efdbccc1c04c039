"""The write side of incognito threads: messages, `/new` and `/reset`, and API resets go to the in-memory
thread store (`cairn.ingest.incognito_store`) instead of JetStream, so nothing of them is ever persisted,
indexed or seen by the session service (which therefore never sends `compaction-imminent` for them).

A message for an incognito key that is not live (never created, expired, or lost with a Redis restart)
is a 404: such a thread is gone, and its messages are not kept anywhere else.
"""

from cairn.edge.problems import Problem
from cairn.events import InboundMessage, new_event_id, utc_now
from cairn.events.incognito import IncognitoEntry
from cairn.events.routing import is_reset_command
from cairn.ingest.incognito_store import Appended, IncognitoThreads, ThreadFull, ThreadGone


def gone(session_key: str) -> Problem:
    return Problem(
        404,
        f"There is no incognito thread {session_key!r}: it was never created, or it ended (incognito threads "
        "live in memory only, until they are idle too long or the service restarts).",
    )


def full(error: ThreadFull) -> Problem:
    message = f"this incognito thread already holds {error.limit} entries, the limit"
    return Problem(413, f"The incognito thread is full: {message}.", [{"field": "session_key", "message": message}])


def entry_for(message: InboundMessage) -> IncognitoEntry:
    """A user's `/new` or `/reset` becomes a reset boundary, as in a persisted session."""
    now = utc_now()
    kind = "reset" if is_reset_command(message) else "message"
    return IncognitoEntry(
        kind=kind,
        message_id=new_event_id(),
        channel=message.channel,
        external_id=message.message_id,
        role=message.role if kind == "message" else None,
        text=message.text if kind == "message" else None,
        sender_name=message.sender_name,
        occurred_at=message.occurred_at or now,
        recorded_at=now,
    )


async def append(threads: IncognitoThreads, tenant: str, session_key: str, message: InboundMessage) -> Appended:
    """Store a message of an incognito thread; raises `Problem` 404 when it is gone, 413 when it is full."""
    try:
        return await threads.append(tenant, message.agent_id, session_key, entry_for(message))
    except ThreadGone as error:
        raise gone(session_key) from error
    except ThreadFull as error:
        raise full(error) from error


async def reset(threads: IncognitoThreads, tenant: str, agent: str, session_key: str) -> Appended:
    """An API reset: a boundary, as `/reset` would record it."""
    boundary = InboundMessage(agent_id=agent, channel="api", text="/reset")
    return await append(threads, tenant, session_key, boundary)
