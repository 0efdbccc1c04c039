"""Model-based extraction of fact candidates from a batch of turns: one model call, read defensively.

`extract` is the interface the record store is wired to; `ask_model` says as well what the call cost and why
nothing could be read. A model that cannot be reached raises `ModelUnavailable` (the batch waits and is tried
again); any other unusable answer is an extraction of nothing, with the reason."""

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from cairn.consolidation.candidates import Candidate
from cairn.consolidation.extraction_reply import TOOL, Unreadable, messages_for, read_reply
from cairn.consolidation.extraction_turns import Turn
from cairn.llm import ModelClient, ModelError, ModelUnavailable, Usage

# Where candidates go: (tenant, agent, candidates). The record store (dedup, supersede) is wired here.
OnCandidates = Callable[[str, str, list[Candidate]], Awaitable[None]]


@dataclass(frozen=True)
class Extraction:
    candidates: list[Candidate]
    usage: Usage
    model: str
    unreadable: str | None = None  # why nothing could be read from the answer
    dropped: int = 0  # items that were no memory


async def ask_model(
    client: ModelClient, turns: Sequence[Turn], *, min_importance: float, answer_tokens: int = 1024
) -> Extraction:
    """One call for the whole batch. Raises ModelUnavailable only."""
    try:
        reply = await client.chat(messages_for(turns), tools=[TOOL], max_tokens=answer_tokens)
    except ModelUnavailable:
        raise
    except ModelError as error:
        return Extraction([], Usage(0, 0), client.model, unreadable=str(error))
    read = read_reply(reply, turns, min_importance)
    if isinstance(read, Unreadable):
        return Extraction([], reply.usage, reply.model, unreadable=read.reason)
    return Extraction(read.candidates, reply.usage, reply.model, dropped=read.dropped)


async def extract(
    client: ModelClient, turns: Sequence[Turn], *, min_importance: float = 0.5, answer_tokens: int = 1024
) -> list[Candidate]:
    """The candidates of a batch of turns (one model call); none when the answer is unusable."""
    if not turns:
        return []
    found = await ask_model(client, turns, min_importance=min_importance, answer_tokens=answer_tokens)
    return found.candidates
