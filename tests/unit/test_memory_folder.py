"""`cairn memory import` planning without I/O: what happens to one path given the local file, the
server's document and what the file was exported as."""

import pytest

from cairn.cli.memory import Base, Remote, Step, plan_import, sha256

EXPORTED = Base(3, sha256("exported\n"))


@pytest.mark.parametrize(
    ("local", "remote", "base", "step"),
    [
        # the same text here and there: nothing to send
        ("same\n", Remote(3, "same\n"), EXPORTED, Step("unchanged")),
        # not edited since export, while the server moved on: keep the server's newer version
        ("exported\n", Remote(5, "newer\n"), EXPORTED,
         Step("unchanged", reason="not edited since export (the server is at version 5)")),
        # edited here, server untouched since export: a new version based on the exported one
        ("edited\n", Remote(3, "exported\n"), EXPORTED, Step("update", 3)),
        # edited here and changed on the server: a conflict, never an overwrite
        ("edited\n", Remote(4, "theirs\n"), EXPORTED,
         Step("conflict", reason="edited here and changed on the server since version 3 (now version 4)")),
        ("edited\n", None, EXPORTED,
         Step("conflict", reason="edited here and changed on the server since version 3 (now deleted)")),
        # a new file: created only if the server has no such document
        ("new\n", None, None, Step("create", 0)),
        ("new\n", Remote(1, "someone else's\n"), None,
         Step("conflict", reason="edited here and changed on the server since the export (now version 1)")),
        # a folder without a manifest: based on whatever the server has now, so the local file wins
        ("mine\n", Remote(7, "theirs\n"), Base(7, None), Step("update", 7)),
        ("mine\n", None, Base(0, None), Step("create", 0)),
    ],
)  # fmt: skip
def test_local_files(local: str, remote: Remote | None, base: Base | None, step: Step) -> None:
    assert plan_import(local, remote, base, delete=False) == step


def test_files_deleted_here_are_deleted_there_only_when_asked_and_only_if_untouched_there() -> None:
    assert plan_import(None, Remote(3, "exported\n"), EXPORTED, delete=False) == Step(
        "kept", reason="deleted here; --delete deletes it on the server"
    )
    assert plan_import(None, Remote(3, "exported\n"), EXPORTED, delete=True) == Step("delete", 3)
    assert plan_import(None, Remote(4, "theirs\n"), EXPORTED, delete=True) == Step(
        "conflict", reason="deleted here, but changed on the server (version 4)"
    )
    assert plan_import(None, None, EXPORTED, delete=True) == Step("unchanged", reason="deleted here and on the server")
