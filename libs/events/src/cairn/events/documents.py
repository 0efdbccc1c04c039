"""Memory documents as every service and the CLI see them: the per-agent layout of paths, the size limit,
and how a document splits into lines (line numbers of reads, search citations and chunks must agree).

Ingest refuses a bad write with these words before anything is published; consolidation checks again
and dead-letters what should never have got through; `cairn memory export` can therefore write every
path under a folder without ever leaving it.
"""

import re
import unicodedata
from datetime import date

from cairn.events.fields import text_problem

MEMORY_FILE = "MEMORY.md"
DAILY_FOLDER = "memory/daily"
SNAPSHOT_FOLDER = "memory/snapshots"
BANK_FOLDER = "memory/bank"
FOLDERS = (BANK_FOLDER, DAILY_FOLDER, SNAPSHOT_FOLDER, "memory/summaries")
# Curated entries a person or the agent keeps (a path, or every path under one ending in "/"): recall's lane 1
# injects only these, they never age in search, and the indexer cuts them entry by entry.
TRUSTED_PATHS = (MEMORY_FILE, f"{BANK_FOLDER}/")
LAYOUT = "MEMORY.md, memory/bank/*.md, memory/daily/YYYY-MM-DD.md, memory/snapshots/*.md or memory/summaries/*.md"
# The layout as one expression, for the OpenAPI documents (a client or a fuzzer builds paths that fit it);
# `path_problem` stays the check, in words a person can act on, and also refuses what a pattern cannot say.
PATH_PATTERN = (
    r'^(MEMORY\.md|memory/(bank|snapshots|summaries)/[^/\\<>:"|?*.][^/\\<>:"|?*]*\.md'
    r"|memory/daily/[0-9]{4}-[0-9]{2}-[0-9]{2}\.md)$"
)
MAX_PATH_CHARS = 512
# Every change travels whole in `memory.document-changed` (NATS refuses messages over 1 MiB; JSON may
# double a text of line breaks), and memory documents are meant to be read by people.
MAX_DOCUMENT_BYTES = 256 * 1024
# Characters that Windows or macOS refuse in file names: an exported folder must open everywhere.
_UNSAFE_NAME = re.compile(r'[<>:"|?*]')


def daily_path(day: date) -> str:
    return f"{DAILY_FOLDER}/{day.isoformat()}.md"


def trusted_path(path: str | None) -> bool:
    """Whether `path` is one of `TRUSTED_PATHS` (itself, or under a folder of them)."""
    return path is not None and any(path == p or (p.endswith("/") and path.startswith(p)) for p in TRUSTED_PATHS)


def _is_date(stem: str) -> bool:
    try:
        return date.fromisoformat(stem).isoformat() == stem
    except ValueError:
        return False


def _shape_problem(path: str) -> str | None:
    """Problems of the path as a relative, portable file path, whatever folder it names."""
    if not path:
        return f"path is empty; use {LAYOUT}"
    if len(path) > MAX_PATH_CHARS:
        return f"path is {len(path)} characters; the limit is {MAX_PATH_CHARS}"
    if path.startswith("/"):
        return "path must be relative to the agent's memory (no leading '/')"
    if not path.isprintable():
        return "path must not contain control characters, line breaks or non-ASCII spaces"
    if "\\" in path:
        return "path separators are '/', never '\\'"
    parts = path.split("/")
    if any(part in (".", "..") for part in parts):
        return "path must not contain '.' or '..' segments"
    if "" in parts:
        return "path must not contain empty segments ('//') or end with '/'"
    if unicodedata.normalize("NFC", path) != path:
        return "path must be in Unicode normalization form NFC"
    return None


def path_problem(path: str) -> str | None:
    """Why `path` is not a document of the layout, in words a person can act on; None when it is one."""
    problem = _shape_problem(path)
    if problem is not None:
        return problem
    if not path.endswith(".md"):
        return "Markdown only: the file name must end in .md"
    if path == MEMORY_FILE:
        return None
    folder, _, name = path.rpartition("/")
    if folder not in FOLDERS:
        return f"path must be one of {LAYOUT}"
    if name.startswith("."):
        return "the file name must not start with '.'"
    if _UNSAFE_NAME.search(name):
        return 'the file name must not contain any of < > : " | ? *'
    if folder == DAILY_FOLDER and not _is_date(name.removesuffix(".md")):
        return "a daily note is named memory/daily/YYYY-MM-DD.md, with a real date"
    return None


def text_size_problem(text: str) -> str | None:
    size = len(text.encode())
    if size > MAX_DOCUMENT_BYTES:
        return f"text is {size} bytes in UTF-8; the limit is {MAX_DOCUMENT_BYTES} bytes"
    return None


def text_character_problem(text: str) -> str | None:
    """Markdown is free text: tabs and line breaks, no other control characters (`cairn.events.fields`)."""
    problem = text_problem(text)
    return None if problem is None else f"text {problem}"


def document_lines(text: str) -> list[str]:
    """The lines of a document, each with its '\\n'. Only '\\n' ends a line, as in editors and `wc -l`, and
    a final line break does not start another line. Line numbers count from 1 in this list."""
    if not text:
        return []
    lines = [f"{line}\n" for line in text.split("\n")]
    last = lines.pop().removesuffix("\n")
    return [*lines, last] if last else lines
