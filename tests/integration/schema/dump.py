"""A schema dump that two databases migrated differently can be compared by: pg_dump's objects, sorted, without
its session settings, comments, owners or the migration ledgers."""

import re

from cairn.local.infra import Postgres

# The ledgers of the numbered chain (schema_migrations) and of the owners' schema folders.
LEDGERS = ("cairn.schema_migrations", "cairn.schema_versions", "cairn.schema_repeatables")
HEADER = re.compile(r"^--\n-- Name: (.*?); Type: (.*?); Schema: (.*?); Owner: .*?\n--\n", re.M)
NOISE = re.compile(r"^(SET |SELECT pg_catalog\.set_config|\\(un)?restrict |ALTER .* OWNER TO |--$|-- PostgreSQL)")


def normalized(dump: str) -> str:
    """One block per object, `-- <schema> <type> <name>` then its statements, in that order."""
    starts = list(HEADER.finditer(dump))
    blocks = []
    for i, header in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(dump)
        lines = [line.rstrip() for line in dump[header.end() : end].splitlines()]
        body = "\n".join(line for line in lines if line and not NOISE.match(line))
        name, kind, schema = header.groups()
        blocks.append(f"-- {schema} {kind} {name}\n{body}\n")
    return "\n".join(sorted(blocks))


def schema_of(postgres: Postgres, port: int, database: str) -> str:
    return normalized(postgres.dump_schema(port, database, *LEDGERS))
