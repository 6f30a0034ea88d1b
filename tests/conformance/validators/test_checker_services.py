"""The files and terminals `check acp` serves an agent: real, confined to the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError

from steerable_bridge.conformance.validators.checker_services import WorkspaceServices

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


async def test_files_are_read_and_written_inside_the_workspace_only(tmp_path: Path) -> None:
    async with WorkspaceServices(str(tmp_path), wait_timeout=10).running() as services:
        target = tmp_path / "sub" / "notes.txt"
        await services.write_text_file(str(target), "one\ntwo\nthree\nfour\n")
        assert target.read_text() == "one\ntwo\nthree\nfour\n"
        whole = await services.read_text_file(str(target))
        assert whole.content == "one\ntwo\nthree\nfour\n"
        part = await services.read_text_file(str(target), line=2, limit=2)
        assert part.content == "two\nthree\n"
        for path in ("notes.txt", str(tmp_path.parent / "elsewhere.txt"), f"{tmp_path}/../x"):
            with pytest.raises(RequestError) as refused:
                await services.write_text_file(path, "x")
            assert refused.value.code == -32602
        with pytest.raises(RequestError):
            await services.read_text_file(str(tmp_path / "missing.txt"))


async def test_a_terminal_runs_reports_and_is_released(tmp_path: Path) -> None:
    async with WorkspaceServices(str(tmp_path), wait_timeout=10).running() as services:
        made = await services.create_terminal(
            "sh", ["-c", "printf marker; pwd; exit 3"], None, None, None
        )
        done = await services.wait_for_terminal_exit(made.terminal_id)
        assert done.exit_code == 3
        output = await services.terminal_output(made.terminal_id)
        assert output.output.startswith("marker")
        assert tmp_path.name in output.output  # it ran in the workspace
        assert output.exit_status is not None and output.exit_status.exit_code == 3
        await services.release_terminal(made.terminal_id)
        with pytest.raises(RequestError):
            await services.terminal_output(made.terminal_id)


async def test_a_killed_terminal_reports_its_signal_and_output_is_capped(tmp_path: Path) -> None:
    async with WorkspaceServices(str(tmp_path), wait_timeout=10).running() as services:
        long = await services.create_terminal("sleep 30", None, None, None, None)
        await services.kill_terminal(long.terminal_id)
        ended = await services.wait_for_terminal_exit(long.terminal_id)
        assert ended.exit_code is None and ended.signal == "SIGKILL"
        loud = await services.create_terminal("yes | head -c 5000", None, None, None, 100)
        await services.wait_for_terminal_exit(loud.terminal_id)
        capped = await services.terminal_output(loud.terminal_id)
        assert capped.truncated and len(capped.output) == 100
        left = await services.create_terminal("sleep 30", None, None, None, None)
    assert left.terminal_id  # leaving the context killed it; no process is left behind
