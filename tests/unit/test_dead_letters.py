"""The pure parts of reading dead letters: whose a message is, where a retry publishes it, what `list` prints."""

import json
import uuid
from datetime import UTC, datetime

from cairn.cli.dead_letters import table
from cairn.delivery.dead_letters import DeadLetter, letter_subject, published_subject, retry_msg_id, tenant_of
from cairn.events import INBOX_STREAM, INGEST_STREAM, RECALL_STREAM
from cairn.events.streams import subject_pattern

TENANT = str(uuid.uuid4())


def letter(stream: str, subject: str, data: bytes = b"{}", seq: int = 7, reason: str = "poison event: x") -> DeadLetter:
    return DeadLetter(seq=seq, consumer="session", tenant=tenant_of(subject, data), reason=reason, subject=subject,
                      stream=stream, stream_seq=41, deliveries=5, time=datetime(2026, 12, 6, 8, 0, tzinfo=UTC),
                      data=data, headers={})  # fmt: skip


def test_the_tenant_comes_from_the_subject_or_else_the_event() -> None:
    assert tenant_of(f"cairn.{TENANT}.main.transcript.appended") == TENANT
    assert tenant_of(f"cairn.{TENANT}.main.message.received.3") == TENANT, "a partitioned stream's stored subject"
    assert tenant_of(f"cairn.in.{TENANT}.message") == TENANT, "an adapter's inbound subject"
    assert tenant_of("", json.dumps({"tenant_id": TENANT}).encode()) == TENANT
    assert tenant_of("", b"\xff not json") is None
    assert tenant_of("", b"[1, 2]") is None


def test_a_dead_letter_is_parked_under_its_tenant_or_under_no_tenant() -> None:
    assert letter_subject("session-p1", f"cairn.{TENANT}.main.message.received.1") == (
        f"cairn-dead-letter.session-p1.{TENANT}"
    )
    assert letter_subject("ingest", f"cairn.in.{TENANT}.message") == f"cairn-dead-letter.ingest.{TENANT}"
    assert letter_subject("x", "", json.dumps({"tenant_id": TENANT}).encode()) == f"cairn-dead-letter.x.{TENANT}"
    assert letter_subject("x", "", b"\xff not json") == "cairn-dead-letter.x.-"
    for unfit in ("a.b", "*", ">", "a b", ""):  # a payload's tenant that would not be one subject token
        assert letter_subject("x", "", json.dumps({"tenant_id": unfit}).encode()) == "cairn-dead-letter.x.-"


def test_a_retry_publishes_on_the_subject_the_original_was_published_on() -> None:
    published = subject_pattern("message.received", TENANT, "main")
    stored = f"{published}.3"  # CAIRN_INGEST stores it with its partition appended
    assert published_subject(letter(INGEST_STREAM, stored)) == published
    recall = f"cairn.{TENANT}.main.recall.performed"
    assert published_subject(letter(RECALL_STREAM, recall)) == recall
    inbound = f"cairn.in.{TENANT}.message"
    assert published_subject(letter(INBOX_STREAM, inbound)) == inbound


def test_each_dead_letter_is_retried_under_a_message_id_of_its_own() -> None:
    first, second = (
        letter(RECALL_STREAM, "cairn.t.main.recall.performed", seq=7),
        letter(RECALL_STREAM, "cairn.t.main.recall.performed", seq=8),
    )
    assert retry_msg_id(first) == retry_msg_id(first), "a repeated retry is dropped as a duplicate"
    assert retry_msg_id(first) != retry_msg_id(second), "the same event dead-lettered again can be retried again"


def test_list_prints_one_aligned_row_per_dead_letter_with_a_short_reason() -> None:
    long_reason = "RuntimeError: " + "x" * 200 + "\nsecond line"
    printed = table([letter(RECALL_STREAM, f"cairn.{TENANT}.main.recall.performed", reason=long_reason)]).splitlines()
    assert printed[0].split() == ["seq", "consumer", "tenant", "time", "deliveries", "stream:seq", "subject", "reason"]
    assert printed[1].split()[:6] == ["7", "session", TENANT, "2026-12-06T08:00:00Z", "5", f"{RECALL_STREAM}:41"]
    assert printed[1].endswith("…")
    assert "second line" not in printed[1]
    assert printed[0].index("reason") == printed[1].index("RuntimeError")


def test_list_of_no_dead_letters_prints_the_header_alone() -> None:
    assert table([]).split() == ["seq", "consumer", "tenant", "time", "deliveries", "stream:seq", "subject", "reason"]
