"""Reads of consolidation's memory documents and their versions, each in a tenant transaction (row-level
security), behind the `DocumentReads` port."""

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import asyncpg

from cairn.storage.postgres import tenant_transaction

GET_DOCUMENT = """
SELECT version, text, updated_at FROM consolidation.documents
WHERE tenant_id = $1 AND agent_id = $2 AND path = $3 AND NOT deleted
"""
# A deletion is a version too (with no text): reading it is a 404, like the deleted document.
GET_VERSION = """
SELECT version, text, created_at AS updated_at FROM consolidation.document_versions
WHERE tenant_id = $1 AND agent_id = $2 AND path = $3 AND version = $4 AND change <> 'deleted'
"""
# Paged by path: $4 is the last path of the previous page ('' for the first).
LIST_DOCUMENTS = """
SELECT path, version, updated_at, octet_length(text) AS bytes FROM consolidation.documents
WHERE tenant_id = $1 AND agent_id = $2 AND NOT deleted AND starts_with(path, $3) AND path > $4
ORDER BY path LIMIT $5
"""
LIST_VERSIONS = """
SELECT version, change, created_at, octet_length(text) AS bytes FROM consolidation.document_versions
WHERE tenant_id = $1 AND agent_id = $2 AND path = $3
ORDER BY version DESC LIMIT $4
"""


@dataclass(frozen=True)
class DocumentText:
    version: int
    text: str
    updated_at: datetime


@dataclass(frozen=True)
class DocumentEntry:
    path: str
    version: int
    updated_at: datetime
    bytes: int


@dataclass(frozen=True)
class VersionEntry:
    version: int
    change: str
    created_at: datetime
    bytes: int


class DocumentReads(Protocol):
    async def document(self, tenant: str, agent: str, path: str, version: int | None) -> DocumentText | None:
        """The current text (or that of `version`); None when missing, deleted or a deletion."""
        ...

    async def documents(self, tenant: str, agent: str, prefix: str, after: str, limit: int) -> list[DocumentEntry]: ...

    async def versions(self, tenant: str, agent: str, path: str, limit: int) -> list[VersionEntry]: ...


class DocumentStore:
    def __init__(self, pool: "asyncpg.Pool[asyncpg.Record]") -> None:
        self._pool = pool

    async def document(self, tenant: str, agent: str, path: str, version: int | None) -> DocumentText | None:
        async with tenant_transaction(self._pool, tenant) as conn:
            if version is None:
                row = await conn.fetchrow(GET_DOCUMENT, tenant, agent, path)
            else:
                row = await conn.fetchrow(GET_VERSION, tenant, agent, path, version)
        return None if row is None else DocumentText(row["version"], row["text"], row["updated_at"])

    async def documents(self, tenant: str, agent: str, prefix: str, after: str, limit: int) -> list[DocumentEntry]:
        async with tenant_transaction(self._pool, tenant) as conn:
            rows = await conn.fetch(LIST_DOCUMENTS, tenant, agent, prefix, after, limit)
        return [DocumentEntry(r["path"], r["version"], r["updated_at"], r["bytes"]) for r in rows]

    async def versions(self, tenant: str, agent: str, path: str, limit: int) -> list[VersionEntry]:
        async with tenant_transaction(self._pool, tenant) as conn:
            rows = await conn.fetch(LIST_VERSIONS, tenant, agent, path, limit)
        return [VersionEntry(r["version"], r["change"], r["created_at"], r["bytes"]) for r in rows]
