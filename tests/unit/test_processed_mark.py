"""The ids a projection's opening statement carries as literals: only UUID text gets into the SQL."""

import uuid

import pytest

from cairn.delivery.consumer import MARK_PROCESSED, MARK_PROCESSED_OF, _literal, _names, _uuids


def test_uuids_become_the_inside_of_an_array_literal() -> None:
    a, b = str(uuid.uuid4()), str(uuid.uuid4()).upper()
    assert _uuids([a, b]) == f"{a},{b}"


@pytest.mark.parametrize(
    "ids",
    [["00000000-0000-0000-0000-00000000000'"], [f"{uuid.uuid4()}\n"], [str(uuid.uuid4()), ""], ["}'::uuid[]); --"]],
    ids=["quote", "newline", "empty", "injection"],
)
def test_anything_but_uuid_text_is_refused(ids: list[str]) -> None:
    with pytest.raises(ValueError, match="not a list of UUIDs"):
        _uuids(ids)


def test_the_consumer_name_is_quoted() -> None:
    sql = MARK_PROCESSED.format(consumer=_literal("it's"), events="", tenants="")
    assert "SELECT 'it''s', event_id" in sql


def test_a_merged_projection_s_names_become_the_inside_of_an_array_literal_each_quoted() -> None:
    assert _names(["indexer", "memory-index", "indexer"]) == '"indexer","memory-index","indexer"'
    sql = MARK_PROCESSED_OF.format(consumers=_names(["a-b"]), events=_uuids([str(uuid.UUID(int=1))]), tenants="")
    assert """unnest('{"a-b"}'::text[], '{00000000-0000-0000-0000-000000000001}'::uuid[]""" in sql


@pytest.mark.parametrize("name", ["it's", 'a"b', "a,b", "a}", "", "a b"])
def test_a_projection_name_that_could_leave_its_literal_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not a list of projection names"):
        _names(["indexer", name])
