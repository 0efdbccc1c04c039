"""Regenerates `before_squash.sql`: the schema the numbered migrations 0001-0151 created on an empty database,
normalized as the comparison test normalizes its own dump. Those files were deleted when each owner's schema got
its baseline; they are read from git history (`git show 504bdc3:<file>`), so anyone can check the fixture:

    uv run --frozen python -m tests.integration.schema.before_squash

It starts a throwaway PostgreSQL and applies the files in order, as the runner of that commit did: as the owner
(not a superuser), in one transaction, after the ledger `cairn.schema_migrations`.

From the squash on the file is also the schema the tree must create: a commit that changes an owner's schema folder
writes the new expected schema over it with `--tree` (the owners' folders applied by `cairn migrate`'s runner instead
of the numbered chain), and the diff of this one file shows the change in review.
"""

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import asyncpg

from cairn.local.infra import Postgres
from cairn.local.processes import free_port
from cairn.local.stack import OWNER
from cairn.storage.migrations import apply_migrations
from tests.integration.schema.dump import schema_of

SQUASHED_AT = "504bdc3"
FOLDER = "libs/platform/src/cairn/platform/migrations"
FIXTURE = Path(__file__).with_name("before_squash.sql")
OLD_LEDGER = """
CREATE SCHEMA IF NOT EXISTS cairn;
CREATE TABLE IF NOT EXISTS cairn.schema_migrations (
    version    int PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
RECORD = "INSERT INTO cairn.schema_migrations (version, name) VALUES ($1, $2)"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def old_migrations() -> list[tuple[int, str, str]]:
    names = git("ls-tree", "--name-only", f"{SQUASHED_AT}:{FOLDER}").split()
    found = []
    for name in names:
        number, _, rest = name.partition("_")
        found.append((int(number), rest.removesuffix(".sql"), git("show", f"{SQUASHED_AT}:{FOLDER}/{name}")))
    return sorted(found)


async def apply_old_chain(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute(OLD_LEDGER)
            for version, name, sql in old_migrations():
                await conn.execute(sql)
                await conn.execute(RECORD, version, name)
    finally:
        await conn.close()


def main(from_tree: bool) -> None:
    home = Path(tempfile.mkdtemp(prefix="cairn-squash-"))
    home.chmod(0o755)
    postgres, port = Postgres(home, durable=False), free_port()
    try:
        postgres.start(port)
        postgres.create_database(port, "before_squash", OWNER)
        url = f"postgresql://{OWNER}@127.0.0.1:{port}/before_squash"
        asyncio.run(apply_migrations(url) if from_tree else apply_old_chain(url))
        FIXTURE.write_text(schema_of(postgres, port, "before_squash"))
        print(f"wrote {FIXTURE}")
    finally:
        postgres.stop()
        shutil.rmtree(postgres.base, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main(from_tree="--tree" in sys.argv[1:])
