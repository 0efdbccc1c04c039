"""The owners' schema folders hold one current definition of every SQL function: each is defined in exactly one
file of the shipped code (libs, services, deploy) and in the tests' SQL, a repeatable `R__<name>.sql` is named
after the function it defines, and every function of the schema the numbered migrations left (the comparison
test's fixture) is defined somewhere."""

import re
from pathlib import Path

from cairn.storage.migrations import OWNERS, available_schema, owner_files

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("libs", "services", "deploy")
FIXTURE = ROOT / "tests" / "integration" / "schema" / "before_squash.sql"
DEFINED = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(\w+\.\w+)\s*\(", re.IGNORECASE)


def _searched_files() -> list[Path]:
    shipped = [p for top in SHIPPED for p in (ROOT / top).rglob("*") if p.suffix in (".sql", ".py")]
    tests_sql = [p for p in (ROOT / "tests").rglob("*.sql") if p != FIXTURE]
    return [p for p in shipped + tests_sql if ".venv" not in p.parts and p.is_file()]


def _definitions() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in _searched_files():
        for name in DEFINED.findall(path.read_text("utf-8", errors="replace")):
            found.setdefault(name.lower(), []).append(str(path.relative_to(ROOT)))
    return found


def test_every_function_is_defined_once() -> None:
    twice = {name: paths for name, paths in _definitions().items() if len(paths) != 1}
    assert twice == {}
    assert "indexer.matching_messages" in _definitions()


def test_every_function_the_numbered_migrations_left_is_defined() -> None:
    left = {name.lower() for name in re.findall(r"^CREATE FUNCTION (\w+\.\w+)\(", FIXTURE.read_text(), re.M)}
    assert len(left) > 30
    assert left - set(_definitions()) == set()


def test_a_repeatable_is_named_after_the_one_function_it_defines() -> None:
    for owner in OWNERS:
        for file in owner_files(owner):
            if file.kind == "repeatable":
                names = {name.split(".")[1].lower() for name in DEFINED.findall(file.sql)}
                assert names == {file.name.removeprefix("R__")}, f"{owner.name}/{file.name} defines {names}"


def test_every_owner_has_its_baseline_first() -> None:
    for owner in OWNERS:  # later versions (V0002...) follow their owner's baseline
        assert owner_files(owner)[0].name == "V0001__baseline", owner.name
    assert available_schema()[0].label == "platform/V0001__baseline"
    assert OWNERS[0].name == "platform", "the roles and row-level security helpers come first"
