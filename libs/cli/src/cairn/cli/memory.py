"""`cairn memory export DIR` and `cairn memory import DIR`: an agent's memory documents as a folder of
Markdown files, to edit in an editor and keep in git, through the public API.

Export writes each document at its path under DIR and a manifest (`.cairn-memory.json`) of the version
and SHA-256 of what it wrote. Import sends back what was edited since: a file equal to the server's
text, or not edited since export, is skipped; an edited one becomes a new version, written with
`If-Match` of the version it was based on, so a document that changed on the server meanwhile is
reported as a conflict instead of being overwritten. Files deleted locally are deleted on the server
only with `--delete`. Without a manifest (a folder from elsewhere) the local files win.
"""

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx

from cairn.events.documents import path_problem

MANIFEST = ".cairn-memory.json"
PAGE = 1000


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Base:
    """What a local file was exported as: the version, and the SHA-256 of its text (None: unknown)."""

    version: int
    sha256: str | None


@dataclass(frozen=True)
class Remote:
    version: int
    text: str


Action = Literal["create", "update", "delete", "unchanged", "kept", "conflict"]


@dataclass(frozen=True)
class Step:
    action: Action
    if_match: int = 0
    reason: str = ""


def plan_import(local: str | None, remote: Remote | None, base: Base | None, *, delete: bool) -> Step:
    """What to do with one path: `local` is the file's text (None: deleted locally), `remote` the
    server's current document, `base` what the file was exported as (None: a file new since export)."""
    remote_version = remote.version if remote else 0
    expected = base.version if base else 0
    if local is None:
        if remote is None:
            return Step("unchanged", reason="deleted here and on the server")
        if not delete:
            return Step("kept", reason="deleted here; --delete deletes it on the server")
        if expected != remote_version:
            return Step("conflict", reason=f"deleted here, but changed on the server (version {remote_version})")
        return Step("delete", remote_version)
    if remote is not None and remote.text == local:
        return Step("unchanged")
    if base is not None and base.sha256 == sha256(local):
        return Step("unchanged", reason=f"not edited since export (the server is at version {remote_version})")
    if expected != remote_version:
        since = f"version {expected}" if expected else "the export"
        now = f"version {remote_version}" if remote else "deleted"
        return Step("conflict", reason=f"edited here and changed on the server since {since} (now {now})")
    return Step("create" if remote is None else "update", remote_version)


@dataclass
class Report:
    counts: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def add(self, action: str, path: str = "", reason: str = "") -> None:
        self.counts[action] += 1
        if reason and action in ("conflict", "invalid", "kept", "failed"):
            self.problems.append(f"{action}: {path}: {reason}")

    @property
    def ok(self) -> bool:
        return not (self.counts["conflict"] or self.counts["invalid"] or self.counts["failed"])

    def summary(self) -> str:
        order = ("exported", "created", "updated", "deleted", "unchanged", "kept", "pending", "conflict", "invalid",
                 "failed", "removed")  # fmt: skip
        return ", ".join(f"{self.counts[name]} {name}" for name in order if self.counts[name]) or "nothing to do"


class MemoryClient:
    """The public API for one agent's documents: listing and raw reads at recall, writes at ingest."""

    def __init__(self, ingest_url: str, recall_url: str, api_key: str, agent_id: str) -> None:
        headers = {"Authorization": f"Bearer {api_key}"}
        self._ingest = httpx.Client(base_url=ingest_url, headers=headers, timeout=60)
        self._recall = httpx.Client(base_url=recall_url, headers=headers, timeout=60)
        self.agent_id = agent_id

    def close(self) -> None:
        self._ingest.close()
        self._recall.close()

    def paths(self) -> Iterator[str]:
        cursor = ""
        while True:
            params: dict[str, str | int] = {"agent_id": self.agent_id, "limit": PAGE, "cursor": cursor}
            page = self._recall.get("/v1/memory/files", params=params).raise_for_status().json()
            yield from (entry["path"] for entry in page["files"])
            if not page["next_cursor"]:
                return
            cursor = page["next_cursor"]

    def read(self, path: str) -> Remote | None:
        response = self._recall.get(
            f"/v1/memory/files/{path}", params={"agent_id": self.agent_id}, headers={"Accept": "text/markdown"}
        )
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return Remote(int(response.headers["ETag"].strip('"')), response.content.decode())

    def write(self, path: str, text: str | None, if_match: int) -> httpx.Response:
        """PUT the text (or DELETE when None), conditional on `if_match`."""
        headers = {"If-Match": str(if_match)}
        if text is None:
            return self._ingest.delete(f"/v1/memory/files/{path}", params={"agent_id": self.agent_id}, headers=headers)
        body = {"agent_id": self.agent_id, "text": text}
        return self._ingest.put(f"/v1/memory/files/{path}", json=body, headers=headers)


def _read_manifest(folder: Path) -> dict[str, Base] | None:
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return None
    documents = json.loads(manifest.read_text("utf-8"))["documents"]
    return {path: Base(entry["version"], entry["sha256"]) for path, entry in documents.items()}


def _write_manifest(folder: Path, agent_id: str, bases: dict[str, Base]) -> None:
    documents = {path: {"version": b.version, "sha256": b.sha256} for path, b in sorted(bases.items())}
    text = json.dumps({"agent_id": agent_id, "documents": documents}, indent=2, ensure_ascii=False) + "\n"
    (folder / MANIFEST).write_text(text, "utf-8")


def _target(folder: Path, path: str) -> Path:
    """Where a document lives under the folder; the layout rules keep every path inside it."""
    problem = path_problem(path)
    if problem is not None:
        raise ValueError(f"{path!r}: {problem}")
    return folder / path


def export_memory(client: MemoryClient, folder: Path) -> Report:
    report = Report()
    folder.mkdir(parents=True, exist_ok=True)
    previous = _read_manifest(folder) or {}
    bases: dict[str, Base] = {}
    for path in client.paths():
        remote = client.read(path)
        if remote is None:  # deleted between the listing and the read
            continue
        target = _target(folder, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(remote.text.encode())
        bases[path] = Base(remote.version, sha256(remote.text))
        report.add("exported")
    for path, base in previous.items():  # exported before, deleted on the server since
        gone = _target(folder, path)
        if path not in bases and gone.is_file() and sha256(gone.read_bytes().decode()) == base.sha256:
            gone.unlink()
            report.add("removed")
    _write_manifest(folder, client.agent_id, bases)
    return report


def _local_documents(folder: Path, report: Report) -> dict[str, str]:
    """The folder's Markdown files by document path; hidden folders (.git) are not looked into."""
    found: dict[str, str] = {}
    for file in sorted(folder.rglob("*")):
        relative = file.relative_to(folder).as_posix()
        if not file.is_file() or any(part.startswith(".") for part in relative.split("/")[:-1]):
            continue
        if relative == MANIFEST or not relative.endswith(".md"):
            continue
        problem = path_problem(relative)
        try:
            text = file.read_bytes().decode()
        except UnicodeDecodeError:
            problem = problem or "not UTF-8 text"
        if problem is not None:
            report.add("invalid", relative, problem)
            continue
        found[relative] = text
    return found


def import_memory(client: MemoryClient, folder: Path, *, delete: bool = False) -> Report:
    report = Report()
    manifest = _read_manifest(folder)
    local = _local_documents(folder, report)
    bases = dict(manifest or {})
    for path in sorted(set(local) | set(bases)):
        remote, text = client.read(path), local.get(path)
        base = bases.get(path) if manifest is not None else Base(remote.version if remote else 0, None)
        step = plan_import(text, remote, base, delete=delete)
        if step.action in ("create", "update", "delete"):
            _apply(client, path, text, step, report, bases)
        else:
            report.add(step.action, path, step.reason)
            _note_agreement(bases, path, text, remote)
    _write_manifest(folder, client.agent_id, bases)
    return report


def _note_agreement(bases: dict[str, Base], path: str, text: str | None, remote: Remote | None) -> None:
    """Where the folder and the server agree, the manifest says so, and later edits compare with that."""
    if text is None and remote is None:
        bases.pop(path, None)
    elif text is not None and remote is not None and text == remote.text:
        bases[path] = Base(remote.version, sha256(text))


def _apply(
    client: MemoryClient, path: str, text: str | None, step: Step, report: Report, bases: dict[str, Base]
) -> None:
    response = client.write(path, text, step.if_match)
    if response.status_code == 409:
        report.add("conflict", path, "changed on the server during the import")
    elif response.status_code == 202:
        report.add("pending", path)
    elif response.is_success:
        body = response.json()
        if text is None:
            bases.pop(path, None)
            report.add("deleted")
        else:
            bases[path] = Base(body["version"], sha256(text))
            report.add("created" if body["change"] == "created" else "updated")
    else:
        problem = "json" in response.headers.get("content-type", "")
        report.add("failed", path, f"{response.status_code}: {response.json()['detail'] if problem else response.text}")
