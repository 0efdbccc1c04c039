"""A service's startup heap is kept out of garbage collections (runtime.settle_heap)."""

import gc
import weakref
from collections.abc import Iterator

import pytest

from cairn.platform.runtime import YOUNG_COLLECTION_OBJECTS, settle_heap


class Thing:
    pass


@pytest.fixture
def restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def walked(thing: object) -> bool:
    """Whether the collector would look at `thing` (frozen objects are not in any generation)."""
    return any(o is thing for o in gc.get_objects())


@pytest.mark.usefixtures("restored")
def test_what_startup_built_is_not_walked_by_collections_and_what_comes_after_is() -> None:
    before = Thing()
    assert walked(before)
    settle_heap()
    after = Thing()
    assert not walked(before)
    assert walked(after)
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("restored")
def test_the_youngest_generation_is_collected_less_often_and_cycles_still_go() -> None:
    older = gc.get_threshold()[1:]
    settle_heap()
    assert gc.get_threshold() == (YOUNG_COLLECTION_OBJECTS, *older)
    cycle: list[object] = [Thing()]
    cycle.append(cycle)
    member = weakref.ref(cycle[0])
    del cycle
    assert member() is not None, "a cycle is not freed by reference counting"
    gc.collect()
    assert member() is None
