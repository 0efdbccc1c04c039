"""Pure bank-file logic, free of I/O: records rendered as lines of `memory/bank/*.md`, and a person's edit of
those lines read back as updates and retirements of their records.

The bank is the human-editable place of truth, so a render never rewrites a line it did not write: it removes
the lines of records retired since (when they still read as rendered), appends the lines of new records, and
keeps every other line, a person's included, as it is.
"""

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from cairn.consolidation.candidates import Kind

BANK_FOLDER = "memory/bank"
BANK_FILES: dict[Kind, str] = {
    "profile": f"{BANK_FOLDER}/profile.md",
    "preference": f"{BANK_FOLDER}/preferences.md",
    "event": f"{BANK_FOLDER}/events.md",
    "plan": f"{BANK_FOLDER}/plans.md",
    "lesson": f"{BANK_FOLDER}/lessons.md",
    "project": f"{BANK_FOLDER}/projects.md",
}
TITLES: dict[Kind, str] = {
    "profile": "Profile",
    "preference": "Preferences",
    "event": "Events",
    "plan": "Plans",
    "lesson": "Lessons",
    "project": "Projects",
}
NOTED: dict[str, str] = {"en": " (noted on {})", "zh": "（记于 {}）", "ja": "（記録日 {}）", "ko": " (기록일 {})"}
NOTED_SUFFIX = re.compile(r"\s*[(（]\s*(?:noted on|记于|記録日|기록일)\s*\d{4}-\d{2}-\d{2}\s*[)）]\s*$")
# How alike a replaced line and a new one must be to read as the same fact edited (difflib's ratio).
SAME_LINE_RATIO = 0.5
BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


@dataclass(frozen=True)
class BankLine:
    """A record as its bank file sees it: the line it would render to now, and the line last written (if any)."""

    record_id: str
    line: str
    rendered: str | None
    current: bool


@dataclass(frozen=True)
class Rendered:
    text: str
    placements: dict[str, tuple[int, str]]  # record id -> (line number from 1, line) for each current record


@dataclass(frozen=True)
class LineEdit:
    """A person changed (`line` is the new line) or removed (`line` None) the line a record rendered to."""

    record_id: str
    line: str | None
    line_number: int | None = None


def bank_path(kind: Kind) -> str:
    return BANK_FILES[kind]


def is_bank_path(path: str) -> bool:
    return path in BANK_FILES.values()


def record_line(text: str, language: str, noted: date) -> str:
    """`- I don't eat spicy food (noted on 2026-12-06)`, `- 我不吃辣（记于 2026-12-06）`: one line per record."""
    flat = " ".join(text.split())
    return f"- {flat}{NOTED.get(language, NOTED['en']).format(f'{noted:%Y-%m-%d}')}"


def fact_of(line: str) -> str:
    """The fact a person wrote on a bank line: without its bullet and its "noted on" date."""
    return NOTED_SUFFIX.sub("", BULLET.sub("", line)).strip()


def render(current: str | None, kind: Kind, records: Sequence[BankLine]) -> Rendered:
    """The bank file's next text: `current` (as read, at its version) less the lines of retired records, plus
    the lines of current records not in it yet."""
    lines = current.splitlines() if current else [f"# {TITLES[kind]}", ""]
    kept_lines = {r.rendered for r in records if r.current and r.rendered}
    gone = {r.rendered for r in records if not r.current and r.rendered} - kept_lines
    out = [line for line in lines if line not in gone]
    placements: dict[str, tuple[int, str]] = {}
    for record in (r for r in records if r.current):
        line = record.rendered if record.rendered in out else record.line
        if line not in out:
            out.append(line)
        placements[record.record_id] = (out.index(line) + 1, line)
    return Rendered("\n".join(out) + "\n", placements)


def placements_in(text: str, records: Sequence[tuple[str, str | None]]) -> dict[str, tuple[int, str]]:
    """Where each record's line is in a file a person edited (records whose line is not in it are left out)."""
    lines = text.splitlines()
    return {rid: (lines.index(line) + 1, line) for rid, line in records if line is not None and line in lines}


def line_edits(before: str, after: str, owned: Sequence[BankLine]) -> list[LineEdit]:
    """How a person's edit of a bank file (`before` -> `after`) touched the lines records rendered to: a line
    replaced by another updates its record, a line removed (or blanked) retires it; other lines are theirs.
    Where several lines were replaced at once, a record's line is paired with the new line most like it, and
    retired when none is (a person who rewrote a block is not assumed to have kept each fact in its place)."""
    old, new = before.splitlines(), after.splitlines()
    by_line = {r.rendered: r.record_id for r in owned if r.current and r.rendered}
    still_there = set(new)
    edits: list[LineEdit] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag not in ("replace", "delete"):
            continue
        changed = [(line, by_line[line]) for line in old[i1:i2] if line in by_line and line not in still_there]
        free = [(j, new[j]) for j in range(j1, j2) if tag == "replace" and fact_of(new[j]) and new[j] not in by_line]
        for line, record_id in changed:
            j = _counterpart(line, free, one_to_one=len(changed) == 1 and len(free) == 1)
            if j is None:
                edits.append(LineEdit(record_id, None))
                continue
            free = [(k, text) for k, text in free if k != j]
            edits.append(LineEdit(record_id, new[j], j + 1))
    return edits


def _counterpart(line: str, free: Sequence[tuple[int, str]], *, one_to_one: bool) -> int | None:
    if one_to_one:
        return free[0][0]
    fact = fact_of(line)
    scored = [(difflib.SequenceMatcher(a=fact, b=fact_of(text)).ratio(), j) for j, text in free]
    best = max(scored, default=None)
    return best[1] if best is not None and best[0] >= SAME_LINE_RATIO else None
