"""The owners' schema folders as the runner applies them: from empty they create exactly what the numbered
migrations 0001-0151 created, a second run applies nothing, a changed function is re-created alone, and a database
the numbered chain migrated is adopted (to its end) or refused (short of it).

`schema/before_squash.sql` is the normalized dump of the numbered chain's schema (regenerate it from git history
with `uv run --frozen python -m tests.integration.schema.before_squash`). From the squash on it is the expected
schema: a change to any owner's schema folder must update it in the same commit (`python -m
tests.integration.schema.before_squash --tree` writes the tree's schema over it), so every schema change shows in
review as a diff of this one file."""

import difflib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from cairn.local import LocalStack
from cairn.local.stack import OWNER
from cairn.storage.migrations import (
    BASELINE,
    OLD_CHAIN_OWNERS,
    OWNERS,
    SchemaError,
    SchemaOwner,
    apply_migrations,
    available_schema,
    schema_folder,
)
from tests.integration.conftest import own_database
from tests.integration.schema.before_squash import FIXTURE, apply_old_chain, old_migrations
from tests.integration.schema.dump import schema_of

pytestmark = pytest.mark.integration

REPEATABLES = "SELECT owner, name, checksum, applied_at FROM cairn.schema_repeatables ORDER BY owner, name"
VERSIONS = "SELECT owner, version, name, applied_at FROM cairn.schema_versions ORDER BY owner, version"
FUNCTION_CREATED = "SELECT xmin::text FROM pg_proc WHERE oid = $1::regprocedure"


def _owner_url(stack: LocalStack, database: str) -> str:
    return stack.database_url(database, OWNER)


async def _fetch(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


@pytest.fixture
async def empty_database(stack: LocalStack) -> AsyncIterator[str]:
    """A database as `create_database` leaves it (owner, pgvector), with no migration applied."""
    name = "schema_empty"
    port = stack.state.ports["postgres"]
    stack.postgres.create_database(port, name, OWNER)
    try:
        yield name
    finally:
        admin = await asyncpg.connect(stack.postgres_url("postgres").rsplit("/", 1)[0] + "/postgres")
        try:
            await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
        finally:
            await admin.close()


async def test_the_baselines_create_what_the_numbered_migrations_created(stack: LocalStack) -> None:
    async with own_database(stack, "squash") as name:
        now = schema_of(stack.postgres, stack.state.ports["postgres"], name)
    expected = FIXTURE.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), now.splitlines(True), str(FIXTURE), name))
    assert now == expected, f"the schema differs from {FIXTURE.name} (update it in the same commit if meant):\n{diff}"


async def test_a_second_run_applies_nothing(stack: LocalStack) -> None:
    async with own_database(stack, "rerun") as name:
        url = _owner_url(stack, name)
        versions, repeatables = await _fetch(url, VERSIONS), await _fetch(url, REPEATABLES)
        assert await apply_migrations(url) == []
        assert await _fetch(url, VERSIONS) == versions
        assert await _fetch(url, REPEATABLES) == repeatables
    assert {r["owner"] for r in versions} == {owner.name for owner in OWNERS}


async def test_a_changed_function_is_recreated_alone(stack: LocalStack, tmp_path: Path) -> None:
    """A copy of the indexer's folder with one function's text changed: only that file is applied again, recorded
    with its new checksum, and the other functions are left as they were (same row version in pg_proc)."""
    indexer = next(o for o in OWNERS if o.name == "indexer")
    folder = tmp_path / "indexer_copy"
    shutil.copytree(schema_folder(indexer), folder / "schema")
    (folder / "__init__.py").touch()
    changed = folder / "schema" / "R__tenant_span.sql"
    changed.write_text(changed.read_text() + "\n-- a comment changes the checksum\n")
    owners = tuple(SchemaOwner("indexer", "indexer_copy") if o.name == "indexer" else o for o in OWNERS)
    async with own_database(stack, "repeat") as name:
        url = _owner_url(stack, name)
        before = {r["name"]: r["checksum"] for r in await _fetch(url, REPEATABLES)}
        untouched = (await _fetch(url, FUNCTION_CREATED, "indexer.search_messages(uuid,tsquery,tsquery,int,int,"
                                  "text,text[],text[],float8[],int)"))[0]["xmin"]  # fmt: skip
        with pytest.MonkeyPatch.context() as patch:
            patch.syspath_prepend(str(tmp_path))
            assert await apply_migrations(url, owners=owners) == ["indexer/R__tenant_span"]
        after = {r["name"]: r["checksum"] for r in await _fetch(url, REPEATABLES)}
        assert {k for k in after if after[k] != before[k]} == {"R__tenant_span"}
        assert (await _fetch(url, FUNCTION_CREATED, "indexer.search_messages(uuid,tsquery,tsquery,int,int,"
                             "text,text[],text[],float8[],int)"))[0]["xmin"] == untouched  # fmt: skip


async def test_a_database_of_the_whole_numbered_chain_is_adopted(stack: LocalStack, empty_database: str) -> None:
    """What an existing `.cairn/` stack holds: the baselines are recorded as applied, the migrations after them
    applied, the functions re-created (identical), and the schema is the one the tree creates."""
    url = _owner_url(stack, empty_database)
    await apply_old_chain(url)
    applied = await apply_migrations(url)
    files = available_schema()
    adopted = [f for f in files if f.kind == "versioned" and f.name == BASELINE and f.owner in OLD_CHAIN_OWNERS]
    newer = [f.label for f in files if f.kind == "versioned" and f not in adopted]
    assert "recall/V0001__baseline" in newer  # an owner added after the squash: applied, not adopted
    assert applied == newer + [f.label for f in files if f.kind == "repeatable"]
    versions = {(f.owner, f.name) for f in files if f.kind == "versioned"}
    assert {(o.name, "V0001__baseline") for o in OWNERS} <= versions
    assert {(r["owner"], r["name"]) for r in await _fetch(url, VERSIONS)} == versions
    assert schema_of(stack.postgres, stack.state.ports["postgres"], empty_database) == FIXTURE.read_text()
    assert await apply_migrations(url) == []


async def test_a_database_short_of_the_numbered_chain_is_refused(stack: LocalStack, empty_database: str) -> None:
    url = _owner_url(stack, empty_database)
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute("CREATE SCHEMA cairn; CREATE TABLE cairn.schema_migrations (version int, name text)")
            await conn.executemany("INSERT INTO cairn.schema_migrations VALUES ($1, $2)",
                                   [(version, name) for version, name, _ in old_migrations()[:-1]])  # fmt: skip
    finally:
        await conn.close()
    with pytest.raises(SchemaError, match="up to 0149, not to their end"):
        await apply_migrations(url)
