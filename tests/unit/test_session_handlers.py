"""The session handlers against an in-memory twin of the `Transcripts` port: no I/O."""

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from cairn.events import (
    AgentConfig,
    AgentConfigured,
    CompactionImminent,
    InboundMessage,
    MessageReceived,
    ResetBoundary,
    ResetPolicy,
    SessionCommand,
    SessionCreated,
    SessionForked,
    TranscriptAppended,
)
from cairn.events.models import TranscriptLine
from cairn.events.routing import incognito_thread_key
from cairn.session.domain import reset_policy_for
from cairn.session.handlers import SessionHandlers
from cairn.session.settings import CompactionSettings, SessionSettings
from cairn.session.store import CopiedMessage, Entry, ForkSource, SessionRow

TENANT = str(uuid.uuid4())
KEY = "agent:main:main"


@dataclass(frozen=True)
class Stored:
    position: int
    entry: Entry
    reset_index: int
    message_id: str


class InMemoryTranscripts:
    """The port's contract in memory: sessions by key, entries by session, external ids per channel, and the
    agents' settings."""

    def __init__(self) -> None:
        self.sessions: dict[str, SessionRow] = {}
        self.agent_of: dict[str, str] = {}
        self.parents: dict[str, str | None] = {}
        self.entries: dict[str, list[Stored]] = {}
        self.chat_type_of: dict[str, str] = {}
        self.settings: dict[str, tuple[int, AgentConfig]] = {}
        self.active_memory: dict[str, bool] = {}  # by key; a key never switched has it on

    def _current(self, key: str, created: bool) -> SessionRow:
        settings = self.settings.get(self.agent_of[key])
        config = settings[1] if settings else None
        return replace(
            self.sessions[key],
            created=created,
            context_window=config.context_window if config else None,
            compaction=config.compaction if config else None,
            reset_policy=reset_policy_for(config.reset, config.reset_policies(), self.chat_type_of[key], key)
            if config
            else None,
        )

    async def open_session(self, tenant: str, agent: str, key: str, chat_type: str, channel: str) -> SessionRow:
        return await self.create_session(tenant, agent, key, str(uuid.uuid4()), chat_type, channel, None)

    async def find_session(self, tenant: str, agent: str, key: str) -> SessionRow | None:
        return self._current(key, created=False) if key in self.sessions else None

    async def create_session(
        self, tenant: str, agent: str, key: str, session_id: str, chat_type: str, channel: str, parent_id: str | None
    ) -> SessionRow:
        if key in self.sessions:
            return self._current(key, created=False)
        self.sessions[key] = SessionRow(session_id, 0, 0, 0, 0, False, 0, True)
        self.agent_of[key], self.parents[session_id], self.entries[session_id] = agent, parent_id, []
        self.chat_type_of[key] = chat_type
        return self._current(key, created=True)

    async def has_external_id(self, tenant: str, channel: str, external_id: str | None) -> bool:
        return external_id is not None and any(
            s.entry.channel == channel and s.entry.external_id == external_id
            for rows in self.entries.values()
            for s in rows
        )

    def _key_of(self, session_id: str) -> str:
        return next(k for k, s in self.sessions.items() if s.session_id == session_id)

    async def append(self, tenant: str, session: SessionRow, entry: Entry) -> tuple[int, str]:
        key, position = self._key_of(session.session_id), session.last_position + 1
        current = self.sessions[key]
        if entry.kind == "reset":
            self.sessions[key] = replace(
                current,
                last_position=position,
                reset_index=current.reset_index + 1,
                window_tokens=0,
                window_bytes=0,
                compaction_flagged=False,
            )
        else:
            last = current.last_activity_at
            self.sessions[key] = replace(
                current,
                last_position=position,
                window_tokens=current.window_tokens + entry.token_estimate,
                window_bytes=current.window_bytes + len((entry.text or "").encode()),
                last_activity_at=max(last, entry.occurred_at)
                if last and entry.activity
                else (entry.occurred_at if entry.activity else last),
            )
        message_id = str(uuid.uuid4())
        self.entries[session.session_id].append(Stored(position, entry, self.sessions[key].reset_index, message_id))
        return position, message_id

    async def flag_compaction(self, tenant: str, session: SessionRow) -> None:
        key = self._key_of(session.session_id)
        self.sessions[key] = replace(self.sessions[key], compaction_flagged=True)

    async def set_active_memory(self, tenant: str, session: SessionRow, enabled: bool) -> None:
        self.active_memory[self._key_of(session.session_id)] = enabled

    async def close_compaction(self, tenant: str, session: SessionRow, first_kept_position: int) -> None:
        key = self._key_of(session.session_id)
        kept = [
            s.entry
            for s in self.entries[session.session_id]
            if s.entry.kind == "message" and s.reset_index == session.reset_index and s.position >= first_kept_position
        ]
        current = self.sessions[key]
        self.sessions[key] = replace(
            current,
            compaction_cycle=current.compaction_cycle + 1,
            compaction_flagged=False,
            window_tokens=sum(e.token_estimate for e in kept),
            window_bytes=sum(len((e.text or "").encode()) for e in kept),
        )

    async def rotate(self, tenant: str, agent: str, key: str, session_id: str) -> SessionRow:
        self.sessions[key] = SessionRow(session_id, 0, 0, 0, 0, False, 0, True)
        self.parents[session_id], self.entries[session_id] = None, []
        return self._current(key, created=True)

    async def window_tail(self, tenant: str, session: SessionRow, limit: int) -> tuple[TranscriptLine, ...]:
        lines = [
            TranscriptLine(
                message_id=s.message_id, role=s.entry.role, text=s.entry.text or "", occurred_at=s.entry.occurred_at
            )
            for s in self.entries[session.session_id]
            if s.reset_index == session.reset_index
            and s.entry.kind == "message"
            and s.entry.role in ("user", "assistant")
            and not (s.entry.text or "").lstrip().startswith("/")
        ]
        return tuple(lines[-limit:])

    async def find_message(self, tenant: str, session: SessionRow, message_id: str) -> ForkSource | None:
        return next(
            (
                ForkSource(s.reset_index, s.position)
                for s in self.entries[session.session_id]
                if s.entry.kind == "message" and message_id in (s.message_id, s.entry.external_id)
            ),
            None,
        )

    async def copy_messages(
        self,
        tenant: str,
        parent: SessionRow,
        source: ForkSource,
        child: SessionRow,
        recorded_at: datetime,
        ingest_seq: int,
    ) -> list[CopiedMessage]:
        picked = [
            s.entry
            for s in self.entries[parent.session_id]
            if s.entry.kind == "message" and s.reset_index == source.reset_index and s.position <= source.up_to_position
        ]
        for entry in picked:
            copy = replace(entry, external_id=None, recorded_at=recorded_at, ingest_seq=ingest_seq)
            await self.append(tenant, self.sessions[self._key_of(child.session_id)], copy)
        return [
            CopiedMessage(s.position, s.message_id, s.entry.channel, s.entry.role or "", s.entry.text or "",
                          s.entry.sender_name, s.entry.peer_id, s.entry.token_estimate, s.entry.occurred_at)
            for s in self.entries[child.session_id]
        ]  # fmt: skip

    async def save_agent_settings(self, tenant: str, agent: str, version: int, config: AgentConfig) -> None:
        if version >= self.settings.get(agent, (0, config))[0]:
            self.settings[agent] = (version, config)


def _received(
    text: str, message_id: str | None = None, role: str = "user", key: str = KEY, minute: int = 30
) -> MessageReceived:
    message = InboundMessage(text=text, message_id=message_id, role=role, channel="telegram")
    at = datetime(2026, 11, 29, 9, minute, tzinfo=UTC)
    return MessageReceived(tenant_id=TENANT, session_key=key, message=message, occurred_at=at)


def _handlers(context_window: int = 200_000) -> SessionHandlers:
    return SessionHandlers(SessionSettings(compaction=CompactionSettings(context_window=context_window)))


async def test_first_message_creates_the_session_and_appends_at_position_one() -> None:
    store = InMemoryTranscripts()
    emitted = await _handlers().on_message(store, _received("hello there"), ingest_seq=7)
    assert [type(e) for e in emitted] == [SessionCreated, TranscriptAppended]
    appended = emitted[1]
    assert isinstance(appended, TranscriptAppended)
    assert (appended.position, appended.reset_index, appended.ingest_seq) == (1, 0, 7)
    assert appended.occurred_at == datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
    assert appended.causation_id == emitted[0].causation_id


async def test_positions_are_consecutive_and_a_resent_message_id_is_stored_once() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    first = await handlers.on_message(store, _received("one", "m-1"), 1)
    second = await handlers.on_message(store, _received("two", "m-2"), 2)
    again = await handlers.on_message(store, _received("one", "m-1"), 3)
    assert [e.position for e in [*first, *second] if isinstance(e, TranscriptAppended)] == [1, 2]
    assert again == []
    assert len(store.entries[store.sessions[KEY].session_id]) == 2


async def test_slash_new_records_a_boundary_with_the_closed_window_tail_and_keeps_the_id() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    for i in range(20):
        await handlers.on_message(store, _received(f"line {i}", f"m{i}"), i)
    await handlers.on_message(store, _received("/status", "cmd"), 20)
    session_id = store.sessions[KEY].session_id
    emitted = await handlers.on_message(store, _received("/new", "reset-1"), 21)
    assert len(emitted) == 1
    boundary = emitted[0]
    assert isinstance(boundary, ResetBoundary)
    assert (boundary.session_id, boundary.reason, boundary.reset_index, boundary.position) == (session_id, "new", 1, 22)
    assert [line.text for line in boundary.closed_window_tail] == [f"line {i}" for i in range(5, 20)]
    after = await handlers.on_message(store, _received("fresh start", "m-after"), 22)
    appended = next(e for e in after if isinstance(e, TranscriptAppended))
    assert (appended.session_id, appended.reset_index, appended.position) == (session_id, 1, 23)
    assert await handlers.on_message(store, _received("/new", "reset-1"), 23) == []  # the same /new re-sent


async def test_assistant_slash_text_is_a_message_not_a_reset() -> None:
    emitted = await _handlers().on_message(InMemoryTranscripts(), _received("/new is a command", role="assistant"), 1)
    assert any(isinstance(e, TranscriptAppended) for e in emitted)


async def test_active_memory_commands_switch_the_flag_and_are_never_stored() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await handlers.on_message(store, _received("hello", "m-1"), 1)
    assert await handlers.on_message(store, _received("/active-memory off", "c-1"), 2) == []
    assert store.active_memory[KEY] is False
    assert await handlers.on_message(store, _received("  /Active-Memory  ", "c-2"), 3) == []  # status
    assert await handlers.on_message(store, _received("/active-memory status", "c-3"), 4) == []
    assert store.active_memory[KEY] is False
    await handlers.on_message(store, _received("/ACTIVE-MEMORY ON", "c-4"), 5)
    assert store.active_memory[KEY] is True
    texts = [s.entry.text for s in store.entries[store.sessions[KEY].session_id]]
    assert texts == ["hello"]
    assert store.sessions[KEY].last_position == 1  # no position was spent on a command


async def test_a_first_active_memory_command_creates_the_session_off() -> None:
    store = InMemoryTranscripts()
    emitted = await _handlers().on_message(store, _received("/active-memory off", "c-1"), 1)
    assert [type(e) for e in emitted] == [SessionCreated]
    assert store.active_memory[KEY] is False
    assert store.entries[store.sessions[KEY].session_id] == []


async def test_anything_else_starting_with_active_memory_is_an_ordinary_message() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    for n, text in enumerate(["/active-memory offline", "/active-memory off please", "/active-memoryoff"]):
        emitted = await handlers.on_message(store, _received(text, f"m-{n}"), n)
        assert any(isinstance(e, TranscriptAppended) for e in emitted), text
    said = await handlers.on_message(store, _received("/active-memory off", role="assistant"), 9)
    assert any(isinstance(e, TranscriptAppended) for e in said)
    assert store.active_memory == {}


async def test_an_idle_rotation_keeps_the_keys_active_memory_switch() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await _configure(store, handlers, ResetPolicy(mode="idle", idle_minutes=10))
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    await handlers.on_message(store, _at("hi", start, "m-1"), 1)
    await handlers.on_message(store, _at("/active-memory off", start, "c-1"), 2)
    first = store.sessions[KEY].session_id
    await handlers.on_message(store, _at("back", start + timedelta(hours=2), "m-2"), 3)
    assert store.sessions[KEY].session_id != first
    assert store.active_memory[KEY] is False


async def test_api_reset_of_a_key_without_a_session_creates_one() -> None:
    store = InMemoryTranscripts()
    command = SessionCommand(tenant_id=TENANT, command="reset", session_key="agent:main:dashboard:x", reason="api")
    emitted = await _handlers().on_command(store, command, 5)
    assert [type(e) for e in emitted] == [SessionCreated, ResetBoundary]


async def test_compaction_imminent_fires_once_per_cycle_and_again_after_a_reset() -> None:
    store, handlers = InMemoryTranscripts(), _handlers(context_window=2000)  # threshold: 200 tokens
    fired = []
    for i in range(40):  # ~25 tokens each: crosses once
        fired += [
            e
            for e in await handlers.on_message(store, _received("x" * 100, f"a{i}"), i)
            if isinstance(e, CompactionImminent)
        ]
    assert len(fired) == 1
    assert fired[0].threshold_tokens == 200
    await handlers.on_message(store, _received("/reset", "r"), 40)
    for i in range(40):
        fired += [
            e
            for e in await handlers.on_message(store, _received("x" * 100, f"b{i}"), 41 + i)
            if isinstance(e, CompactionImminent)
        ]
    assert len(fired) == 2
    # each carries its snapshot: the window and the position of the message that crossed the threshold
    assert [(e.reset_index, e.cycle) for e in fired] == [(0, 0), (1, 0)]
    assert all(e.up_to_position is not None and e.up_to_position > 1 for e in fired)
    assert not any(e.forced for e in fired)


async def _compaction_report(handlers: SessionHandlers, store: InMemoryTranscripts, kept: str) -> list[object]:
    command = SessionCommand(tenant_id=TENANT, command="compaction", session_key=KEY, first_kept_message_id=kept)
    return list(await handlers.on_command(store, command, 99))


async def test_a_compaction_of_a_cycle_that_never_crossed_the_threshold_still_fires_once_forced() -> None:
    """The runtime compacted on an overflow or by command before cairn's estimate crossed: the flush of the
    cycle it closes is not skipped. A report of a cycle that did fire adds nothing."""
    store, handlers = InMemoryTranscripts(), _handlers()  # threshold far away
    for i in range(3):
        await handlers.on_message(store, _received("x" * 100, f"f{i}"), i)
    [forced] = await _compaction_report(handlers, store, "f2")
    assert isinstance(forced, CompactionImminent)
    assert (forced.forced, forced.cycle, forced.reset_index, forced.up_to_position) == (True, 0, 0, 3)
    assert store.sessions[KEY].compaction_cycle == 1

    store, handlers = InMemoryTranscripts(), _handlers(context_window=2000)
    for i in range(12):  # crosses: compaction-imminent fired for cycle 0
        await handlers.on_message(store, _received("x" * 100, f"g{i}"), i)
    assert store.sessions[KEY].compaction_flagged
    assert await _compaction_report(handlers, store, "g11") == []


THREAD = "agent:main:dashboard:5b0d3c1e-2f4a-4b6c-8d9e-0f1a2b3c4d5e"
CHILD = "agent:main:dashboard:7e6d5c4b-3a29-4817-a6b5-c4d3e2f1a0b9"


def _command(command: str, key: str, parent: str | None = None, **fields: object) -> SessionCommand:
    return SessionCommand.model_validate(
        {"tenant_id": TENANT, "command": command, "session_key": key, "session_id": str(uuid.uuid4()),
         "parent_session_key": parent, "channel": "dashboard", **fields}
    )  # fmt: skip


async def test_a_console_thread_is_created_with_the_id_ingest_chose_and_messages_land_in_it() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    command = _command("create", THREAD)
    [created] = await handlers.on_command(store, command, 9)
    assert isinstance(created, SessionCreated)
    assert (created.session_key, created.session_id, created.channel, created.ingest_seq) == (
        THREAD, command.session_id, "dashboard", 9,
    )  # fmt: skip
    assert await handlers.on_command(store, command, 9) == []  # the same command again: idempotent
    emitted = await handlers.on_message(store, _received("first words", "m-1", key=THREAD), 10)
    [appended] = emitted  # no second session.created: the thread exists
    assert isinstance(appended, TranscriptAppended)
    assert (appended.session_id, appended.position) == (command.session_id, 1)


async def test_a_thread_with_a_parent_records_it_and_a_missing_parent_leaves_it_a_root() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await handlers.on_message(store, _received("hello"), 1)
    [child] = await handlers.on_command(store, _command("create", THREAD, parent=KEY), 2)
    assert isinstance(child, SessionCreated)
    assert child.parent_session_id == store.sessions[KEY].session_id
    [orphan] = await handlers.on_command(store, _command("create", CHILD, parent="agent:main:nowhere"), 3)
    assert isinstance(orphan, SessionCreated)
    assert orphan.parent_session_id is None


async def test_incognito_and_id_less_commands_write_nothing() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    assert await handlers.on_command(store, _command("create", THREAD, incognito=True), 1) == []
    legacy = SessionCommand(tenant_id=TENANT, command="create", session_key=THREAD)
    assert await handlers.on_command(store, legacy, 2) == []
    assert store.sessions == {}


async def test_nothing_addressed_to_an_incognito_key_is_ever_stored() -> None:
    """Ingest never publishes incognito traffic; should some arrive anyway, it is still not written."""
    store, handlers = InMemoryTranscripts(), _handlers(context_window=2000)
    key = incognito_thread_key("main")
    for i in range(12):  # enough to cross the compaction threshold of a persisted session
        assert await handlers.on_message(store, _received("x" * 100, f"inc{i}", key=key), i) == []
    assert await handlers.on_message(store, _received("/new", "inc-new", key=key), 12) == []
    reset = SessionCommand(tenant_id=TENANT, command="reset", session_key=key)
    assert await handlers.on_command(store, reset, 13) == []
    assert store.sessions == {}


async def _parent_with_two_windows(store: InMemoryTranscripts, handlers: SessionHandlers) -> None:
    """Window 0: two messages; `/new`; window 1: a user message, a tool result, an assistant reply."""
    await handlers.on_message(store, _received("old plan: Lisbon", "tg-1", minute=1), 1)
    await handlers.on_message(store, _received("old reply", "tg-2", role="assistant", minute=2), 2)
    await handlers.on_message(store, _received("/new", "tg-3", minute=3), 3)
    await handlers.on_message(store, _received("new plan: Porto", "tg-4", minute=4), 4)
    await handlers.on_message(store, _received("weather: sunny", "tg-5", role="tool", minute=5), 5)
    await handlers.on_message(store, _received("Porto it is", "tg-6", role="assistant", minute=6), 6)


async def test_fork_copies_the_current_window_renumbered_with_new_ids_and_leaves_the_parent_untouched() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await _parent_with_two_windows(store, handlers)
    parent = store.sessions[KEY]
    before = list(store.entries[parent.session_id])
    command = _command("fork", CHILD, parent=KEY, chat_type="direct")
    emitted = await handlers.on_command(store, command, 7)

    assert [type(e) for e in emitted] == [SessionCreated, *[TranscriptAppended] * 3, SessionForked]
    created, copies, forked = emitted[0], emitted[1:4], emitted[4]
    assert isinstance(created, SessionCreated)
    assert (created.session_id, created.parent_session_id, created.ingest_seq) == (
        command.session_id, parent.session_id, None,  # the fork's position is reached with session.forked
    )  # fmt: skip
    assert [(c.position, c.text, c.role, c.reset_index) for c in copies if isinstance(c, TranscriptAppended)] == [
        (1, "new plan: Porto", "user", 0),
        (2, "weather: sunny", "tool", 0),
        (3, "Porto it is", "assistant", 0),
    ]
    originals = {s.message_id for s in before}
    for copy in copies:
        assert isinstance(copy, TranscriptAppended)
        assert copy.session_id == command.session_id
        assert copy.session_key == CHILD
        assert copy.message_id not in originals
        assert copy.external_id is None
        assert copy.ingest_seq is None  # the fork's position is reached with session.forked, after every copy
    assert [c.occurred_at.minute for c in copies] == [4, 5, 6]  # event time kept
    assert isinstance(forked, SessionForked)
    assert (forked.parent_session_key, forked.parent_session_id, forked.from_position, forked.ingest_seq) == (
        KEY, parent.session_id, 6, 7,
    )  # fmt: skip
    assert store.entries[parent.session_id] == before
    assert store.sessions[KEY] == parent
    assert store.parents[created.session_id] == parent.session_id
    child = store.sessions[CHILD]
    assert (child.last_position, child.reset_index) == (3, 0)
    assert await handlers.on_command(store, command, 7) == []  # the same fork again: idempotent


async def test_fork_from_a_message_copies_up_to_it_by_adapter_id_or_our_id_in_its_own_window() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await _parent_with_two_windows(store, handlers)
    parent_id = store.sessions[KEY].session_id

    by_adapter_id = await handlers.on_command(store, _command("fork", CHILD, parent=KEY, from_message_id="tg-5"), 7)
    assert [e.text for e in by_adapter_id if isinstance(e, TranscriptAppended)] == ["new plan: Porto", "weather: sunny"]
    assert [e.from_position for e in by_adapter_id if isinstance(e, SessionForked)] == [5]

    first = next(s for s in store.entries[parent_id] if s.entry.external_id == "tg-1")
    earlier = await handlers.on_command(
        store, _command("fork", THREAD, parent=KEY, from_message_id=first.message_id), 8
    )
    assert [e.text for e in earlier if isinstance(e, TranscriptAppended)] == ["old plan: Lisbon"]


async def test_the_parent_keeps_its_adapter_ids_so_a_resent_parent_message_is_still_stored_once() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await _parent_with_two_windows(store, handlers)
    await handlers.on_command(store, _command("fork", CHILD, parent=KEY), 7)
    assert await handlers.on_message(store, _received("new plan: Porto", "tg-4"), 8) == []


async def test_fork_of_a_vanished_parent_or_message_copies_nothing() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    [created] = await handlers.on_command(store, _command("fork", CHILD, parent="agent:main:gone"), 1)
    assert isinstance(created, SessionCreated)
    assert created.ingest_seq == 1
    await _parent_with_two_windows(store, handlers)
    emitted = await handlers.on_command(store, _command("fork", THREAD, parent=KEY, from_message_id="tg-404"), 9)
    assert [e.type for e in emitted] == ["session.created.v1", "session.forked.v1"]


def _configured(version: int, context_window: int | None) -> AgentConfigured:
    config = AgentConfig(context_window=context_window, reset=ResetPolicy(mode="idle", idle_minutes=30))
    return AgentConfigured(tenant_id=TENANT, version=version, config=config)


async def test_the_agents_context_window_sets_its_compaction_threshold() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()  # service default: 200,000 tokens
    assert await handlers.on_configured(store, _configured(2, 2000)) == []
    assert await handlers.on_configured(store, _configured(1, 500_000)) == []  # an older version arrives late
    assert (store.settings["main"][0], store.settings["main"][1].context_window) == (2, 2000)
    fired = [
        e
        for i in range(12)  # ~25 tokens each: crosses 200 = max(2000 - 24000, 2000 // 10)
        for e in await handlers.on_message(store, _received("x" * 100, f"c{i}"), i)
        if isinstance(e, CompactionImminent)
    ]
    assert [(e.threshold_tokens, e.estimated_tokens) for e in fired] == [(200, 200)]


async def test_without_an_agent_window_the_service_default_applies() -> None:
    store, handlers = InMemoryTranscripts(), _handlers(context_window=2000)
    await handlers.on_configured(store, _configured(1, None))
    emitted = [e for i in range(8) for e in await handlers.on_message(store, _received("x" * 100, f"d{i}"), i)]
    assert [e.threshold_tokens for e in emitted if isinstance(e, CompactionImminent)] == [200]


def _at(text: str, when: datetime, message_id: str, key: str = KEY, channel: str = "telegram") -> MessageReceived:
    message = InboundMessage(text=text, message_id=message_id, channel=channel)
    return MessageReceived(tenant_id=TENANT, session_key=key, message=message, occurred_at=when)


async def _configure(store: InMemoryTranscripts, handlers: SessionHandlers, reset: ResetPolicy) -> None:
    configured = AgentConfigured(tenant_id=TENANT, version=1, config=AgentConfig(reset=reset))
    await handlers.on_configured(store, configured)


async def test_an_idle_session_continues_in_a_new_session_with_a_boundary_for_the_old_one() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await _configure(store, handlers, ResetPolicy(mode="idle", idle_minutes=30))
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    await handlers.on_message(store, _at("first", start, "i1"), 1)
    first_id = store.sessions[KEY].session_id
    assert [type(e) for e in await handlers.on_message(store, _at("soon", start + timedelta(minutes=29), "i2"), 2)] == [
        TranscriptAppended
    ]
    emitted = await handlers.on_message(store, _at("later", start + timedelta(minutes=70), "i3"), 3)
    assert [type(e) for e in emitted] == [ResetBoundary, SessionCreated, TranscriptAppended]
    boundary, _, appended = emitted
    assert isinstance(boundary, ResetBoundary)
    assert isinstance(appended, TranscriptAppended)
    assert (boundary.session_id, boundary.reason) == (first_id, "idle")
    assert [line.text for line in boundary.closed_window_tail] == ["first", "soon"]
    assert appended.session_id != first_id
    assert appended.session_id == store.sessions[KEY].session_id
    assert appended.position == 1


async def test_daily_reset_happens_once_the_local_hour_has_passed() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await _configure(store, handlers, ResetPolicy(mode="daily", at_hour=4, timezone="Asia/Shanghai"))
    evening = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # 20:00 in Shanghai
    await handlers.on_message(store, _at("evening", evening, "d1"), 1)
    first_id = store.sessions[KEY].session_id
    await handlers.on_message(store, _at("before four", evening + timedelta(hours=7), "d2"), 2)  # 03:00 local
    assert store.sessions[KEY].session_id == first_id
    emitted = await handlers.on_message(store, _at("after four", evening + timedelta(hours=9), "d3"), 3)  # 05:00
    assert any(isinstance(e, ResetBoundary) and e.reason == "daily" for e in emitted)
    assert store.sessions[KEY].session_id != first_id


async def test_heartbeats_never_keep_a_session_fresh() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await _configure(store, handlers, ResetPolicy(mode="idle", idle_minutes=30))
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    await handlers.on_message(store, _at("hello", start, "h1"), 1)
    first_id = store.sessions[KEY].session_id
    for minutes in (20, 40, 60):  # a heartbeat every 20 minutes neither resets nor refreshes
        await handlers.on_message(
            store, _at("ping", start + timedelta(minutes=minutes), f"hb{minutes}", channel="heartbeat"), 1
        )
        assert store.sessions[KEY].session_id == first_id
    emitted = await handlers.on_message(store, _at("back", start + timedelta(minutes=61), "h2"), 5)
    assert any(isinstance(e, ResetBoundary) and e.reason == "idle" for e in emitted)


async def test_a_compaction_report_closes_the_cycle_so_the_next_crossing_fires_again() -> None:
    store, handlers = InMemoryTranscripts(), _handlers(context_window=2000)  # threshold: 200 tokens
    fired: list[CompactionImminent] = []
    for i in range(12):  # ~25 tokens each: crosses once, at about the 8th message
        emitted = await handlers.on_message(store, _received("x" * 100, f"a{i}"), i)
        fired += [e for e in emitted if isinstance(e, CompactionImminent)]
    assert [e.cycle for e in fired] == [0]
    report = SessionCommand(tenant_id=TENANT, command="compaction", session_key=KEY, first_kept_message_id="a10")
    assert await handlers.on_command(store, report, 12) == []
    assert store.sessions[KEY].window_tokens == 50  # the two kept messages
    for i in range(12):
        emitted = await handlers.on_message(store, _received("x" * 100, f"b{i}"), 13 + i)
        fired += [e for e in emitted if isinstance(e, CompactionImminent)]
    assert [e.cycle for e in fired] == [0, 1]


async def test_cron_sessions_never_get_compaction_imminent() -> None:
    store, handlers = InMemoryTranscripts(), _handlers(context_window=2000)
    for i in range(40):
        message = InboundMessage(text="x" * 100, message_id=f"cron{i}", channel="cron")
        event = MessageReceived(tenant_id=TENANT, session_key="cron:nightly", message=message)
        emitted = await handlers.on_message(store, event, i)
        assert not any(isinstance(e, CompactionImminent) for e in emitted)


def _in(
    chat_type: str, text: str, when: datetime, message_id: str, key: str, thread_id: str | None = None
) -> MessageReceived:
    chat_id = None if chat_type == "direct" else "-100"
    message = InboundMessage(
        text=text, message_id=message_id, channel="telegram", chat_type=chat_type, chat_id=chat_id, thread_id=thread_id
    )
    return MessageReceived(tenant_id=TENANT, session_key=key, message=message, occurred_at=when)


GROUP = "agent:main:telegram:group:-100"
GROUP_THREAD = "agent:main:telegram:group:-100:thread:7"
BY_TYPE = AgentConfig.model_validate(
    {
        "reset": {"mode": "none", "timezone": "Asia/Shanghai"},
        "reset_by_type": {
            "direct": {"mode": "daily", "at_hour": 4},  # in the agent's zone, Shanghai
            "group": {"mode": "idle", "idle_minutes": 30},
            "thread": {"mode": "none"},
        },
    }
)


async def _session_ids(
    store: InMemoryTranscripts, handlers: SessionHandlers, events: list[MessageReceived]
) -> list[str]:
    ids = []
    for seq, event in enumerate(events, start=1):
        await handlers.on_message(store, event, seq)
        ids.append(store.sessions[event.session_key].session_id)
    return ids


async def test_each_chat_type_follows_its_own_reset_policy() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    await handlers.on_configured(store, AgentConfigured(tenant_id=TENANT, version=1, config=BY_TYPE))
    start = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # 20:00 in Shanghai
    later = start + timedelta(hours=2)  # idle for two hours, still before 04:00 in Shanghai
    next_day = start + timedelta(hours=10)  # 06:00 in Shanghai: past the daily hour
    direct = await _session_ids(
        store, handlers, [_in("direct", "a", start, "d1", KEY), _in("direct", "b", later, "d2", KEY),
                          _in("direct", "c", next_day, "d3", KEY)],
    )  # fmt: skip
    group = await _session_ids(
        store, handlers, [_in("group", "a", start, "g1", GROUP), _in("group", "b", start + timedelta(minutes=20), "g2",
                          GROUP), _in("group", "c", later, "g3", GROUP)],
    )  # fmt: skip
    thread = await _session_ids(
        store, handlers, [_in("group", "a", start, "t1", GROUP_THREAD, "7"),
                          _in("group", "b", next_day, "t2", GROUP_THREAD, "7")],
    )  # fmt: skip
    assert direct[0] == direct[1] != direct[2]  # two idle hours are fine, the daily hour is not
    assert group[0] == group[1] != group[2]  # twenty minutes are fine, two hours idle are not
    assert thread[0] == thread[1]  # threads never reset, although they are in a group


async def test_a_chat_type_without_its_own_policy_follows_the_agents_default() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()
    config = AgentConfig.model_validate(
        {"reset": {"mode": "idle", "idle_minutes": 30}, "reset_by_type": {"direct": {"mode": "none"}}}
    )
    await handlers.on_configured(store, AgentConfigured(tenant_id=TENANT, version=1, config=config))
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    events = [_in(t, "x", start + timedelta(hours=h), f"{t}{h}", k) for t, k in (("direct", KEY), ("group", GROUP))
              for h in (0, 3)]  # fmt: skip
    ids = await _session_ids(store, handlers, events)
    assert ids[0] == ids[1]  # direct: none
    assert ids[2] != ids[3]  # group: the default, idle after 30 minutes


async def test_an_agents_compaction_thresholds_replace_the_services() -> None:
    store, handlers = InMemoryTranscripts(), _handlers(context_window=2000)  # service threshold: 200 tokens
    config = AgentConfig.model_validate(
        {"context_window": 100_000, "compaction": {"reserve_tokens": 50_000, "soft_threshold_tokens": 10_000}}
    )  # 40,000 tokens, where the service's reserve and soft threshold would give 76,000
    await handlers.on_configured(store, AgentConfigured(tenant_id=TENANT, version=1, config=config))
    fired = [
        e
        for i in range(45)  # 1,000 tokens each
        for e in await handlers.on_message(store, _received("x" * 4000, f"t{i}"), i)
        if isinstance(e, CompactionImminent)
    ]
    assert [(e.threshold_tokens, e.estimated_tokens) for e in fired] == [(40_000, 40_000)]


async def test_an_agents_byte_limit_fires_before_any_token_threshold() -> None:
    store, handlers = InMemoryTranscripts(), _handlers()  # service: 200,000 tokens, 2 MiB
    config = AgentConfig.model_validate({"compaction": {"max_transcript_bytes": 2048}})
    await handlers.on_configured(store, AgentConfigured(tenant_id=TENANT, version=1, config=config))
    fired = [
        e
        for i in range(5)
        for e in await handlers.on_message(store, _received("y" * 1000, f"b{i}"), i)
        if isinstance(e, CompactionImminent)
    ]
    assert [e.transcript_bytes for e in fired] == [3000]
