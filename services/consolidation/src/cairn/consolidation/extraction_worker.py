"""Extraction after turns, as two loops every replica runs.

`TranscriptTurns` reads the transcript entries of the session stream (a consumer of its own, filtered on that one
subject, so the snapshot and flush handlers never queue behind them) and adds the extractable ones to their
session's batch in Redis: no Postgres, one Redis round trip per fetched batch, then the ack.

`ExtractionWorker` takes the batches that are due, one model call each: with no model configured the turns are
counted as extracted by no model (memory status says so); past the session's hourly cap the batch waits for the
next hour; while the model cannot be reached it waits with a growing backoff, whole. Candidates go to
`on_candidates` (the record store)."""

import asyncio
import logging
import time
from collections.abc import Sequence

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from pydantic import ValidationError

from cairn.consolidation.extraction import OnCandidates, ask_model
from cairn.consolidation.extraction_turns import extractable, turn_of
from cairn.consolidation.extraction_window import Claim, ExtractionWindow
from cairn.consolidation.records_handlers import explicit_requests
from cairn.consolidation.settings import ExtractionSettings
from cairn.delivery.faults import Backoff
from cairn.delivery.publisher import EventPublisher
from cairn.delivery.pull import PullConsumer
from cairn.delivery.settings import NatsSettings
from cairn.events import SESSION_STREAM, TranscriptAppended
from cairn.events import extraction as counted
from cairn.events.streams import subject_pattern
from cairn.llm import Models, ModelUnavailable

log = logging.getLogger(__name__)

TURNS_CONSUMER = "consolidation-extraction"
TRANSCRIPT_ENTRIES = subject_pattern("transcript.appended")
PURPOSE = "extraction"
CLAIMS_PER_POLL = 8


class TranscriptTurns(PullConsumer):
    def __init__(
        self,
        js: JetStreamContext,
        nats: NatsSettings,
        window: ExtractionWindow,
        settings: ExtractionSettings,
        *,
        where: tuple[str, str, str] = (TURNS_CONSUMER, SESSION_STREAM, TRANSCRIPT_ENTRIES),
        requests: EventPublisher | None = None,
    ) -> None:
        """`where`: the consumer's name, its stream and the subject it reads (tests read a stream of their own).
        `requests`: where the explicit "remember …" rules' record requests are published (none: not read here);
        model extraction batches turns only while it is enabled."""
        super().__init__(where[0], where[1], js, nats, where[2])
        self.window, self.settings, self.requests = window, settings, requests

    async def process_batch(self, messages: Sequence[Msg]) -> None:
        by_agent: dict[tuple[str, str], list[TranscriptAppended]] = {}
        for raw in messages:
            try:
                event = TranscriptAppended.model_validate_json(raw.data)
            except ValidationError as error:
                await self.dead_letter(raw, f"undecodable transcript entry: {error}")
                continue
            if extractable(event):
                by_agent.setdefault((str(event.tenant_id), event.agent_id), []).append(event)
        if self.requests is not None:
            explicit = explicit_requests([e for events in by_agent.values() for e in events])
            if explicit:  # acknowledged before the entries are: a failure holds the batch and it is read again
                await self.requests.publish_many(explicit)
        if self.settings.enabled:
            for (tenant, agent), events in by_agent.items():
                await self.window.add(tenant, agent, [turn_of(e, self.settings.turn_chars) for e in events])
        for raw in messages:
            if not raw.is_acked:
                await raw.ack()


class ExtractionWorker:
    """A plain supervised loop (no stream of its own: it polls the due batches in Redis)."""

    consumer = "extraction-worker"
    stream = "redis"

    def __init__(
        self, window: ExtractionWindow, models: Models, settings: ExtractionSettings, on_candidates: OnCandidates
    ) -> None:
        self.window, self.models, self.settings, self.on_candidates = window, models, settings, on_candidates
        self._retries = Backoff(settings.retry_first_s, settings.retry_cap_s)

    async def run(self) -> None:
        while True:
            if not await self.run_due():
                await asyncio.sleep(self.settings.poll_s)

    async def run_due(self) -> int:
        """Extracts the batches due now (a few at a time); returns how many were claimed."""
        claims = [c for ref in await self.window.due(CLAIMS_PER_POLL) if (c := await self.window.claim(ref))]
        outcomes = await asyncio.gather(*(self.extract(claim) for claim in claims), return_exceptions=True)
        # A batch whose extraction failed (Postgres away for the usage record, the record store refusing) stays
        # claimed until its lease runs out, then is extracted again; the first failure goes to the supervisor.
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        if failed:
            raise failed[0]
        return len(claims)

    async def extract(self, claim: Claim) -> None:
        client = await self.models.for_tenant(claim.tenant_id)
        if client is None:
            await self.window.finish(claim, {counted.NO_MODEL: "*"})
            return
        if not claim.turns:
            await self.window.finish(claim, {})
            return
        next_hour = await self.window.take_call(claim)
        if next_hour is not None:
            log.info("extraction of %s waits for the next hour: its hourly cap is reached", claim.ref)
            await self.window.put_back(claim, next_hour, counted.CAPPED)
            return
        settings = self.settings
        try:
            found = await ask_model(
                client, claim.turns, min_importance=settings.min_importance, answer_tokens=settings.answer_tokens
            )
        except ModelUnavailable as error:
            await self.window.give_back_call(claim)
            delay = self._retries.delay(claim.attempts)
            log.warning("extraction of %s waits %.0fs: %s", claim.ref, delay, error)
            await self.models.record_usage(claim.tenant_id, PURPOSE, None, failed=True, model=client.model)
            await self.window.put_back(claim, time.time() + delay, counted.RETRIES)
            return
        await self.models.record_usage(claim.tenant_id, PURPOSE, found.usage, model=found.model)
        if found.unreadable is not None:
            log.warning("extraction of %s read nothing from the model's answer: %s", claim.ref, found.unreadable)
        if found.candidates:
            await self.on_candidates(claim.tenant_id, claim.agent_id, found.candidates)
        await self.window.finish(claim, {
            counted.CALLS: 1,
            counted.PROMPT_TOKENS: found.usage.prompt_tokens,
            counted.COMPLETION_TOKENS: found.usage.completion_tokens,
            counted.BAD_REPLIES: int(found.unreadable is not None),
            counted.CANDIDATES: len(found.candidates),
            counted.TURNS: "*",
        })  # fmt: skip
