"""The approvals file trusts only answers this agent signed: a forged or copied one grants none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from steerable_bridge.adapters.storage.approval_file import ApprovalFile

pytestmark = pytest.mark.anyio


def approvals(tmp_path: Path) -> ApprovalFile:
    return ApprovalFile(str(tmp_path / "project" / "approvals.json"), str(tmp_path / "key"))


async def test_a_kept_answer_is_recalled_by_another_process(tmp_path: Path) -> None:
    await approvals(tmp_path).remember("/p", "run_command:git status", True)
    await approvals(tmp_path).remember("/p", "write_file", False)
    fresh = approvals(tmp_path)  # as a new process would read it
    assert await fresh.recall("/p", "run_command:git status") is True
    assert await fresh.recall("/p", "write_file") is False
    assert await fresh.recall("/q", "write_file") is None
    assert (tmp_path / "key").stat().st_mode & 0o077 == 0


async def test_forged_copied_and_unsigned_answers_grant_nothing(tmp_path: Path) -> None:
    memory = approvals(tmp_path)
    await memory.remember("/p", "run_command:git status", True)
    path = tmp_path / "project" / "approvals.json"
    data = json.loads(path.read_text())
    signed = data["projects"]["/p"]["run_command:git status"]
    data["projects"]["/p"]["run_command:sh"] = {"answer": "allow", "mac": "0" * 64}  # forged
    data["projects"]["/p"]["run_command:rm"] = signed  # a real MAC moved to another key
    data["projects"]["/q"] = {"run_command:git status": signed}  # ... or another project
    data["projects"]["/p"]["write_file"] = "allow"  # the unsigned version-1 form
    path.write_text(json.dumps(data))
    fresh = approvals(tmp_path)
    assert await fresh.recall("/p", "run_command:git status") is True
    for root, key in (
        ("/p", "run_command:sh"),
        ("/p", "run_command:rm"),
        ("/q", "run_command:git status"),
        ("/p", "write_file"),
    ):
        assert await fresh.recall(root, key) is None, (root, key)


async def test_without_the_key_nothing_is_trusted(tmp_path: Path) -> None:
    await approvals(tmp_path).remember("/p", "write_file", True)
    (tmp_path / "key").unlink()  # e.g. a file copied from another machine
    assert await approvals(tmp_path).recall("/p", "write_file") is None
    other_key = ApprovalFile(str(tmp_path / "project" / "approvals.json"), str(tmp_path / "k2"))
    await other_key.remember("/p", "edit_file", True)
    assert await other_key.recall("/p", "write_file") is None  # signed under the old key
    assert await other_key.recall("/p", "edit_file") is True
