"""A recall's read-your-writes wait (`progress.wait_until`) ends when its recall is cancelled, even when the index
moved at that very moment: Python 3.11's `asyncio.wait_for` returns the result of a wait that completed as the
cancellation arrived, swallowing it, and the run went on to lane 2 and a model call after its answer was sent."""

import asyncio

from cairn.recall.progress import wait_until


async def test_a_cancellation_that_meets_the_wake_up_ends_the_wait() -> None:
    moved = asyncio.Event()
    looked = asyncio.Event()
    looks = 0

    async def reached() -> bool:
        nonlocal looks
        looks += 1
        looked.set()
        return False

    waiting = asyncio.create_task(wait_until(reached, 30.0, 10.0, lambda: moved))
    await looked.wait()
    await asyncio.sleep(0)  # now waiting for the index to move
    moved.set()  # the index moved ...
    waiting.cancel()  # ... as the recall's deadline cancels the wait
    done, _ = await asyncio.wait({waiting}, timeout=5.0)
    assert done, "the wait kept going after its cancellation"
    assert waiting.cancelled()
    assert looks == 1  # no look at the index after the cancellation
