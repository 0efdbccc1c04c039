"""`cairn memory export` → edit in the folder → `cairn memory import`, as a user would run them, against
the running services: exports are byte-exact, edits become versions, untouched files and documents that
moved on at the server are left alone, a file edited on both sides is a conflict, not an overwrite."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cairn.local import LocalStack
from tests.conftest import Tenant

pytestmark = pytest.mark.e2e
CAIRN = str(Path(sys.executable).parent / "cairn")
LONG_LINE = "长" * 15_000  # longer than a read window: the export must not cut it


def cairn_memory(endpoints: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CAIRN, "memory", *args, "--endpoints", str(endpoints)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def put(tenant: Tenant, path: str, text: str) -> dict[str, Any]:
    response = tenant.ingest.put(f"/v1/memory/files/{path}", json={"text": text})
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def server_text(tenant: Tenant, path: str) -> str | None:
    response = tenant.recall.get(f"/v1/memory/files/{path}", headers={"Accept": "text/markdown"})
    return response.content.decode() if response.status_code == 200 else None


@pytest.fixture
def endpoints(services: LocalStack, tenant: Tenant, tmp_path: Path) -> Path:
    key = tenant.ingest.headers["Authorization"].removeprefix("Bearer ")
    env = tmp_path / "endpoints.env"
    env.write_text(
        f"CAIRN_INGEST_URL={services.url('ingest')}\nCAIRN_RECALL_URL={services.url('recall')}\nCAIRN_API_KEY={key}\n"
    )
    return env


def test_export_edit_import_round_trip(tenant: Tenant, endpoints: Path, tmp_path: Path) -> None:
    originals = {
        "MEMORY.md": "# Memory\n\n- prefers tea\n",
        "memory/bank/profile.md": "name: Li Wei\r\ncity: 上海\r\n",
        "memory/bank/long.md": f"{LONG_LINE}\nend\n",
        "memory/daily/2026-11-28.md": "- walked",
        "memory/daily/2026-11-29.md": "- swam\n",
    }
    for path, text in originals.items():
        put(tenant, path, text)
    folder = tmp_path / "memory-folder"

    exported = cairn_memory(endpoints, "export", str(folder))
    assert exported.returncode == 0, exported.stderr
    assert "5 exported" in exported.stdout
    assert {p: (folder / p).read_bytes().decode() for p in originals} == originals
    manifest = json.loads((folder / ".cairn-memory.json").read_text())
    assert {p: e["version"] for p, e in manifest["documents"].items()} == dict.fromkeys(originals, 1)

    # edits in the folder (and a .git folder and a non-Markdown file, which import leaves alone)
    (folder / "MEMORY.md").write_text("# Memory\n\n- prefers oolong tea\n")
    (folder / "memory/bank/rules.md").write_text("- never call before 9\n")
    (folder / "memory/daily/2026-11-29.md").unlink()
    (folder / "memory/bank/profile.md").write_text("name: Li Wei\ncity: Beijing\n")
    (folder / "notes.txt").write_text("not memory")
    (folder / ".git").mkdir()
    (folder / ".git/HEAD.md").write_text("ref")
    # meanwhile at the server: the agent appends to a daily note, someone edits the profile
    assert tenant.ingest.post("/v1/memory/daily", json={"text": "- ran", "date": "2026-11-28"}).status_code == 200
    put(tenant, "memory/bank/profile.md", "name: Li Wei\ncity: Shenzhen\n")

    imported = cairn_memory(endpoints, "import", str(folder))
    assert imported.returncode == 1, imported.stdout  # the conflict is an error for scripts
    assert "1 created, 1 updated, 2 unchanged, 1 kept, 1 conflict" in imported.stdout
    assert "conflict: memory/bank/profile.md: edited here and changed on the server since version 1" in imported.stderr
    assert "kept: memory/daily/2026-11-29.md" in imported.stderr
    assert server_text(tenant, "MEMORY.md") == "# Memory\n\n- prefers oolong tea\n"
    assert (
        tenant.recall.get("/v1/memory/files/MEMORY.md", params={"version": 1}).json()["text"] == originals["MEMORY.md"]
    )
    assert server_text(tenant, "memory/bank/rules.md") == "- never call before 9\n"
    assert server_text(tenant, "memory/daily/2026-11-28.md") == "- walked\n- ran"  # not reverted
    assert server_text(tenant, "memory/bank/profile.md") == "name: Li Wei\ncity: Shenzhen\n"  # not overwritten
    assert server_text(tenant, "memory/daily/2026-11-29.md") == "- swam\n"  # deleted here only
    assert server_text(tenant, "memory/bank/long.md") == originals["memory/bank/long.md"]

    again = cairn_memory(endpoints, "import", str(folder))
    assert again.stdout.strip().endswith(": 4 unchanged, 1 kept, 1 conflict")  # the first import's edits are in

    # take the server's side, then delete the daily note for real
    refreshed = cairn_memory(endpoints, "export", str(folder))
    assert refreshed.returncode == 0, refreshed.stderr
    assert (folder / "memory/bank/profile.md").read_text() == "name: Li Wei\ncity: Shenzhen\n"
    (folder / "memory/daily/2026-11-29.md").unlink()
    deleting = cairn_memory(endpoints, "import", str(folder), "--delete")
    assert deleting.returncode == 0, deleting.stderr
    assert deleting.stdout.strip().endswith("1 deleted, 5 unchanged")
    assert server_text(tenant, "memory/daily/2026-11-29.md") is None
    assert tenant.recall.get("/v1/memory/files/memory/daily/2026-11-29.md", params={"version": 1}).status_code == 200

    settled = cairn_memory(endpoints, "import", str(folder))
    assert (settled.returncode, settled.stdout.strip().split(": ")[-1]) == (0, "5 unchanged")


def test_import_reports_files_outside_the_layout(tenant: Tenant, endpoints: Path, tmp_path: Path) -> None:
    folder = tmp_path / "loose"
    (folder / "memory/projects").mkdir(parents=True)
    (folder / "memory/projects/cairn.md").write_text("- ship it\n")
    (folder / "MEMORY.md").write_text("# Memory\n")
    imported = cairn_memory(endpoints, "import", str(folder))
    assert imported.returncode == 1
    assert "1 created, 1 invalid" in imported.stdout
    assert "invalid: memory/projects/cairn.md: path must be one of MEMORY.md" in imported.stderr
    assert server_text(tenant, "MEMORY.md") == "# Memory\n"
    assert [f["path"] for f in tenant.recall.get("/v1/memory/files").json()["files"]] == ["MEMORY.md"]
