"""The HPUB frames the publisher writes, built as nats-py builds them (and checked as it checks them): a message's
headers (the caller's trace context, the expected stream, the dedup id) and, in an atomic batch, the batch's
headers (ADR-50: `Nats-Batch-Id`, `Nats-Batch-Sequence` from 1, `Nats-Batch-Commit: 1` on the last)."""

import re
from collections.abc import Mapping

from nats.errors import BadHeaderError, BadSubjectError

MSG_ID = "Nats-Msg-Id"
EXPECTED_STREAM = "Nats-Expected-Stream"
BATCH_ID = "Nats-Batch-Id"
BATCH_SEQUENCE = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"
_OWN = {name.lower() for name in (MSG_ID, EXPECTED_STREAM, BATCH_ID, BATCH_SEQUENCE, BATCH_COMMIT)}
# as nats-py checks and cleans headers: a key is an HTTP token, a value is trimmed and has no CR/LF
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
# what nats-py refuses in a subject it publishes to (CR/LF or whitespace would break the protocol line)
_BAD_SUBJECT = re.compile(r"[ \t\r\n]")


def header_block(headers: Mapping[str, str], stream: str) -> bytes:
    """The start of a message's header section: the version line, `headers` (ours win over theirs) and the
    expected stream. A message appends its `Nats-Msg-Id` line and the blank line (`message_headers`)."""
    lines = [b"NATS/1.0\r\n"]
    for name, value in headers.items():
        key = name.strip()
        if not key or key.lower() in _OWN:
            continue
        if not _HEADER_KEY.fullmatch(key):
            raise BadHeaderError(key)
        lines.append(f"{key}: {value.strip().translate(_NEWLINES)}\r\n".encode())
    lines.append(f"{EXPECTED_STREAM}: {stream}\r\n".encode())
    return b"".join(lines)


def _msg_id_line(msg_id: str) -> bytes:
    return b"%s: %s\r\n" % (MSG_ID.encode(), msg_id.strip().translate(_NEWLINES).encode())


def message_headers(block: bytes, msg_id: str) -> bytes:
    return block + _msg_id_line(msg_id) + b"\r\n"


def batch_message_headers(block: bytes, msg_id: str, batch_id: str, sequence: int, commit: bool) -> bytes:
    """A message's headers as the `sequence`th (from 1) of atomic batch `batch_id`; `commit` on the last."""
    batch = b"%s: %s\r\n%s: %d\r\n" % (BATCH_ID.encode(), batch_id.encode(), BATCH_SEQUENCE.encode(), sequence)
    if commit:
        batch += b"%s: 1\r\n" % BATCH_COMMIT.encode()
    return block + _msg_id_line(msg_id) + batch + b"\r\n"


def hpub(subject: bytes, reply: bytes, headers: bytes, payload: bytes) -> bytes:
    """One HPUB frame, as nats-py's `hpub_cmd` writes it."""
    size = len(headers)
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, size, size + len(payload), headers, payload)


def hpub_unanswered(subject: bytes, headers: bytes, payload: bytes) -> bytes:
    """One HPUB frame without a reply subject: a message inside an atomic batch, answered by its commit."""
    size = len(headers)
    return b"HPUB %s %d %d\r\n%s%s\r\n" % (subject, size, size + len(payload), headers, payload)


def checked_subject(subject: str) -> bytes:
    if not subject or _BAD_SUBJECT.search(subject):
        raise BadSubjectError
    return subject.encode()
