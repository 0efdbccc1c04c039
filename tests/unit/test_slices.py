"""How a fetched batch is cut into transactions by size (`cairn.delivery.consumer.by_size`)."""

from cairn.delivery.consumer import by_size


def test_runs_keep_order_and_stay_within_the_bound() -> None:
    sizes = [3, 4, 2, 5, 1, 1, 6]

    runs = list(by_size(sizes, lambda n: n, 7))

    assert runs == [[3, 4], [2, 5], [1, 1], [6]]
    assert [n for run in runs for n in run] == sizes


def test_an_item_larger_than_the_bound_is_a_run_of_its_own() -> None:
    assert list(by_size([2, 10, 2], lambda n: n, 5)) == [[2], [10], [2]]


def test_nothing_gives_no_runs() -> None:
    assert list(by_size([], lambda n: n, 5)) == []
