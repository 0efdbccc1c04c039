"""The grey zone's one model call: is the new fact the same as a current record, an update of it, or a different
fact? With no model configured (or the model down) there is no verdict, and the record is kept as new and marked
pending: a guess is never stored as a judgement."""

import logging
import re

from cairn.consolidation.records import Verdict
from cairn.llm import ModelError, Models

log = logging.getLogger(__name__)

PURPOSE = "record-judge"
SYSTEM_PROMPT = (
    "You compare two facts about the same person or thing, as stored in a memory. Answer with exactly one word: "
    "same (the new fact repeats the stored one, maybe in other words or another language), update (it changes "
    "or corrects the stored value), or different (both can be true at once)."
)
VERDICT = re.compile(r"\b(same|update|different)\b", re.IGNORECASE)


def verdict_of(answer: str | None) -> Verdict | None:
    found = VERDICT.search(answer or "")
    if found is None:
        return None
    word = found.group(1).lower()
    return "same" if word == "same" else "update" if word == "update" else "different"


async def judge(models: Models | None, tenant: str, stored: str, new: str) -> Verdict | None:
    """One call; None when there is no model, it cannot be reached, or its answer is none of the three words."""
    client = None if models is None else await models.for_tenant(tenant)
    if models is None or client is None:
        return None
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Stored fact: {stored}\nNew fact: {new}"},
    ]
    try:
        result = await client.chat(messages, max_tokens=4)
    except ModelError as error:  # ModelUnavailable included: the record waits as pending, the event does not
        log.warning("the grey-zone judgement of tenant %s failed, record kept as pending: %s", tenant, error)
        await models.record_usage(tenant, PURPOSE, None, failed=True, model=client.model)
        return None
    await models.record_usage(tenant, PURPOSE, result)
    return verdict_of(result.content)
