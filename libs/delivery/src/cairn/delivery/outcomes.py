"""What one published event comes to: its place in the stream, or the error JetStream (or the connection) gave."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    seq: int
    duplicate: bool


Outcome = Published | Exception
