"""`cairn import` splits its batches by size as well as count, so none is over the services' body limit
(CAIRN_HTTP_MAX_BODY_BYTES) even when every text is as large as a message may be."""

import json

from cairn.cli.importer import BATCH, BATCH_BYTES, batches
from cairn.edge.settings import HttpSettings


def test_batches_of_the_largest_texts_stay_under_the_body_limit_in_order() -> None:
    messages = [{"text": "字" * 21_845, "message_id": f"m{i}"} for i in range(300)]  # ~64 KiB of UTF-8 each
    sent = list(batches(messages))
    assert [m for batch in sent for m in batch] == messages
    for batch in sent:
        body = json.dumps({"messages": batch}, ensure_ascii=False).encode()
        assert len(body) <= BATCH_BYTES < HttpSettings().max_body_bytes
    assert len(sent) > 1


def test_small_messages_go_by_count() -> None:
    messages = [{"text": f"hello {i}"} for i in range(BATCH * 2 + 1)]
    assert [len(batch) for batch in batches(messages)] == [BATCH, BATCH, 1]
