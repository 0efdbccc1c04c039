"""What recall searches with: the user's message and, by the agent's `query_mode`, the turns before it in
the session's live window (`recent`: the last two user turns and the last assistant turn, each cut short;
`full`: the window, newest first up to a budget; `message`: nothing else). Building is pure; reading the
turns goes through the history store, bounded to a few rows."""

from collections.abc import Sequence
from dataclasses import dataclass

from cairn.events.agents import QueryMode
from cairn.recall.history_queries import HistoryStore
from cairn.recall.recall_block import cut

USER_TURN_CHARS = 220
ASSISTANT_TURN_CHARS = 180
RECENT_USER_TURNS = 2
FULL_TURN_CHARS = 400
FULL_BUDGET_CHARS = 4000
MESSAGE_CHARS = 2000
ROWS_READ = {"message": 0, "recent": 8, "full": 40}  # newest messages read from the window per mode
ROLES = ("user", "assistant")


@dataclass(frozen=True)
class Turn:
    role: str
    text: str


@dataclass(frozen=True)
class RecallQuery:
    message: str
    context: tuple[Turn, ...]  # oldest first

    @property
    def search_text(self) -> str:
        """What the searches run on (and what the result cache is keyed by)."""
        return "\n".join([*(t.text for t in self.context), self.message])

    def prompt_text(self) -> str:
        """The same for the sub-agent, with who said what."""
        lines = [f"{t.role}: {t.text}" for t in self.context]
        if not lines:
            return self.message
        return "Recent conversation:\n" + "\n".join(lines) + f"\n\nLatest user message: {self.message}"


def _without_current(newest_first: Sequence[Turn], message: str) -> list[Turn]:
    """The turns before the message: the runtime may have stored the message before asking (then it is the
    newest user turn), or not."""
    turns = [t for t in newest_first if t.text.strip()]
    if turns and turns[0].role == "user" and turns[0].text.strip() == message.strip():
        return turns[1:]
    return turns


def recent_context(newest_first: Sequence[Turn], message: str) -> tuple[Turn, ...]:
    picked: list[Turn] = []
    users = 0
    assistant = False
    for turn in _without_current(newest_first, message):
        if turn.role == "user" and users < RECENT_USER_TURNS:
            picked.append(Turn("user", cut(turn.text, USER_TURN_CHARS)))
            users += 1
        elif turn.role == "assistant" and not assistant:
            picked.append(Turn("assistant", cut(turn.text, ASSISTANT_TURN_CHARS)))
            assistant = True
        if users == RECENT_USER_TURNS and assistant:
            break
    return tuple(reversed(picked))


def full_context(newest_first: Sequence[Turn], message: str, budget: int = FULL_BUDGET_CHARS) -> tuple[Turn, ...]:
    picked: list[Turn] = []
    used = len(message)
    for turn in _without_current(newest_first, message):
        text = cut(turn.text, FULL_TURN_CHARS)
        if used + len(text) > budget:
            break
        picked.append(Turn(turn.role, text))
        used += len(text)
    return tuple(reversed(picked))


def build_query(mode: QueryMode, message: str, newest_first: Sequence[Turn]) -> RecallQuery:
    """A long message (a pasted document) is searched by its first MESSAGE_CHARS characters."""
    searched = cut(message, MESSAGE_CHARS) if len(message) > MESSAGE_CHARS else message
    if mode == "recent":
        return RecallQuery(searched, recent_context(newest_first, message))
    if mode == "full":
        return RecallQuery(searched, full_context(newest_first, searched))
    return RecallQuery(searched, ())


async def newest_turns(history: HistoryStore, tenant: str, agent: str, session_key: str, mode: QueryMode) -> list[Turn]:
    """The newest user and assistant messages of the session's live window, newest first (none for a session
    not stored yet, or in `message` mode)."""
    rows = ROWS_READ[mode]
    if not rows:
        return []
    async with history.reader(tenant) as reads:
        head = await reads.session(agent, session_key)
        if head is None:
            return []
        stored = await reads.newest_messages(head.session_id, head.reset_index, ROLES, rows, 0)
    return [Turn(m.role, m.text) for m in stored]
