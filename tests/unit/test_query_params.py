"""Empty query parameters count as absent (API.md writes query strings as templates: `?agent_id=&prefix=`)."""

import pytest

from cairn.edge.query import without_empty_values


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        (b"agent_id=&prefix=", b""),
        (b"agent_id=&prefix=memory%2Fbank%2F", b"prefix=memory%2Fbank%2F"),
        (b"agent_id=ops&limit=&include_tools", b"agent_id=ops"),
        (b"message_id=a%3Db&from=2", b"message_id=a%3Db&from=2"),  # kept byte for byte
        (b"q==", b"q=="),  # the value is "=": not empty
        (b"", b""),
    ],
)
def test_pairs_without_a_value_are_dropped_and_the_rest_kept(raw: bytes, kept: bytes) -> None:
    assert without_empty_values(raw) == kept
