"""`cairn dead-letters list|show|retry|discard`: the dead-letter stream for an operator. The reading and settling is
`cairn.delivery.dead_letters`; this module parses the flags, connects and prints."""

import argparse
import json
import sys
from urllib.parse import urlsplit

import nats.errors
from pydantic_settings import BaseSettings, SettingsConfigDict

from cairn.delivery import dead_letters
from cairn.delivery.dead_letters import DeadLetter, DeadLetterNotFound, NotRetryable
from cairn.delivery.nats import connect
from cairn.delivery.settings import NatsSettings

REASON_WIDTH = 60


class DeadLetterSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_", extra="ignore")

    nats: NatsSettings = NatsSettings()


def add_commands(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    letters = commands.add_parser("dead-letters", help="see, retry or discard what consumers dead-lettered")
    actions = letters.add_subparsers(dest="action", required=True)
    listed = actions.add_parser("list", help="every dead letter, oldest first")
    listed.add_argument("--tenant", help="only this tenant's")
    listed.add_argument("--consumer", help="only this consumer's (e.g. session, indexer-transcripts)")
    listed.add_argument("--json", action="store_true", help="one JSON object per line")
    show = actions.add_parser("show", help="one dead letter, with its decoded event")
    retried = actions.add_parser("retry", help="publish it again on its original subject, then remove it")
    discarded = actions.add_parser("discard", help="delete it for good")
    discarded.add_argument("--reason", required=True, help="why (printed with what was discarded)")
    for action in (show, retried, discarded):
        action.add_argument("seq", type=int, help="its sequence in CAIRN_DEAD_LETTER (from `list`)")


def summary(letter: DeadLetter) -> dict[str, object]:
    return {
        "seq": letter.seq,
        "consumer": letter.consumer,
        "tenant": letter.tenant,
        "reason": letter.reason,
        "subject": letter.subject,
        "stream": letter.stream,
        "stream_seq": letter.stream_seq,
        "time": letter.time.isoformat() if letter.time else None,
        "deliveries": letter.deliveries,
    }


def table(letters: list[DeadLetter]) -> str:
    columns = ("seq", "consumer", "tenant", "time", "deliveries", "stream:seq", "subject", "reason")
    rows = [
        (
            str(letter.seq), letter.consumer, letter.tenant or "-",
            letter.time.strftime("%Y-%m-%dT%H:%M:%SZ") if letter.time else "-", str(letter.deliveries),
            f"{letter.stream}:{letter.stream_seq}", letter.subject, _short(letter.reason),
        )
        for letter in letters
    ]  # fmt: skip
    widths = [max([len(c), *(len(row[i]) for row in rows)]) for i, c in enumerate(columns)]
    lines = ["  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip()
             for row in (columns, *rows)]  # fmt: skip
    return "\n".join(lines)


def _short(reason: str) -> str:
    line = reason.splitlines()[0] if reason else ""
    return line if len(line) <= REASON_WIDTH else line[: REASON_WIDTH - 1] + "…"


async def run(args: argparse.Namespace) -> int:
    """Carry out one `cairn dead-letters` action; the exit status."""
    url = DeadLetterSettings().nats.url
    try:
        nc = await connect(url, "cairn-dead-letters", attempts=3)
    except (OSError, nats.errors.Error) as error:
        where = urlsplit(url).netloc.rpartition("@")[2]  # never print credentials
        print(f"cairn dead-letters could not reach NATS at {where}; set CAIRN_NATS_URL ({type(error).__name__})",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        return await _act(nc.jetstream(), args)
    except (DeadLetterNotFound, NotRetryable, ValueError) as error:  # ValueError: a --tenant that is no tenant id
        print(f"cairn dead-letters {args.action}: {error}", file=sys.stderr)
        return 1
    finally:
        await nc.close()


async def _act(js: "nats.js.JetStreamContext", args: argparse.Namespace) -> int:
    if args.action == "list":
        letters = await dead_letters.dead_letters(js, args.tenant, args.consumer)
        if args.json:
            for letter in letters:
                print(json.dumps(summary(letter), ensure_ascii=False))
        else:
            print(table(letters))
            print(f"{len(letters)} dead letter{'' if len(letters) == 1 else 's'}")
    elif args.action == "show":
        letter = await dead_letters.dead_letter(js, args.seq)
        print(json.dumps({**summary(letter), "payload": letter.payload()}, indent=2, ensure_ascii=False))
    elif args.action == "retry":
        retried = await dead_letters.retry(js, args.seq)
        again = " (already published by an earlier retry)" if retried.duplicate else ""
        print(f"retried dead letter {args.seq} ({retried.letter.consumer}): published on {retried.subject} as "
              f"{retried.letter.stream} seq {retried.seq}{again}; removed from the dead letters")  # fmt: skip
    else:
        letter = await dead_letters.discard(js, args.seq)
        failure = letter.reason.splitlines()[0] if letter.reason else "-"
        print(f"discarded dead letter {args.seq} ({letter.consumer}, tenant {letter.tenant or '-'}, "
              f"{letter.stream}:{letter.stream_seq}, failed with: {failure}); reason: {args.reason}")  # fmt: skip
    return 0
