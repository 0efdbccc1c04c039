"""`cairn bench load` times searches on a table in the state autovacuum keeps a live one in: right after it grew
the index by copying rows, it vacuums and analyzes the table itself (what autovacuum would otherwise be doing
alongside the timed searches, and the hint bits each first read would write)."""

import uuid

import asyncpg
import pytest

from cairn.cli.bench_load import COPY_INDEX_ROWS, settle
from cairn.local import LocalStack
from tests.integration.conftest import own_database

pytestmark = pytest.mark.integration

INSERT = """
INSERT INTO indexer.messages (tenant_id, agent_id, message_id, session_key, session_id, position, reset_index, role,
    chat_type, text, terms, occurred_at, external_id)
SELECT $1, 'main', gen_random_uuid(), 'agent:main:main', gen_random_uuid(), i, 0, 'user', 'direct',
    'chat number ' || i, to_tsvector('simple', 'chat number ' || i), now() - make_interval(secs => i), 'm' || i
FROM generate_series(1, 2000) i
"""
STATE = """
SELECT c.relpages, c.relallvisible, s.n_ins_since_vacuum, s.last_vacuum, s.last_analyze
FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = 'indexer.messages'::regclass
"""


async def test_the_copied_rows_are_vacuumed_and_analyzed_before_searches_are_timed(stack: LocalStack) -> None:
    async with own_database(stack, "settle") as name:
        url = stack.database_url(name, "postgres")
        superuser = await asyncpg.connect(url)
        try:
            # the bench's settle alone, never autovacuum in between (its own database: nothing else is affected)
            await superuser.execute("ALTER TABLE indexer.messages SET (autovacuum_enabled = false)")
            # test clusters commit asynchronously, and a row's page is all-visible only once its commit is flushed
            await superuser.execute("SET synchronous_commit = on")
            tenant = uuid.uuid4()
            await superuser.execute(INSERT, tenant)
            await superuser.execute(COPY_INDEX_ROWS, [tenant], 1, "#copy1", 2000)
            await superuser.execute("SELECT pg_stat_force_next_flush()")
            before = await superuser.fetchrow(STATE)
            assert before is not None
            assert before["relallvisible"] == 0
            assert before["n_ins_since_vacuum"] == 4000
            assert before["last_vacuum"] is None
            assert before["last_analyze"] is None

            assert await settle(url) >= 0
            await superuser.execute("SELECT pg_stat_clear_snapshot()")
            after = await superuser.fetchrow(STATE)
            assert after is not None
            assert after["relpages"] > 0
            assert after["relallvisible"] == after["relpages"], "every page all-visible"
            assert after["n_ins_since_vacuum"] == 0
            assert after["last_vacuum"] is not None
            assert after["last_analyze"] is not None
        finally:
            await superuser.close()
