"""The local environment: confined disk access and commands that leave no process behind."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.tools.local_env import LocalEnvironment, run_argv
from steerable_bridge.runtime.ports.environment import WorkspaceError
from tests.adapters.tools.conftest import live_group_members, members_after_kill

pytestmark = pytest.mark.anyio


async def test_read_and_write_round_trip_with_line_and_limit(
    local_env: LocalEnvironment, project: Path
) -> None:
    target = str(project / "notes" / "deep" / "n.txt")
    await local_env.write_text(target, "one\ntwo\nthree\nfour\n")
    assert (project / "notes" / "deep" / "n.txt").read_text() == "one\ntwo\nthree\nfour\n"
    assert await local_env.read_text(target, line=2, limit=2) == "two\nthree\n"
    assert await local_env.read_text(target, line=4) == "four\n"
    await local_env.write_text(target, "short\n")  # shorter content truncates the rest
    assert await local_env.read_text(target) == "short\n"


async def test_binary_files_are_refused(local_env: LocalEnvironment, project: Path) -> None:
    (project / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    with pytest.raises(WorkspaceError) as info:
        await local_env.read_text(str(project / "logo.png"))
    assert info.value.code == "binary_file"


async def test_large_files_are_read_in_parts(project: Path) -> None:
    from steerable_bridge.adapters.tools.paths import Workspace

    env = LocalEnvironment(Workspace.of(str(project)), max_file_bytes=100_000)
    big = project / "big.log"
    big.write_text("".join(f"line {i}\n" for i in range(1, 50_001)))
    with pytest.raises(WorkspaceError) as info:
        await env.read_text(str(big))
    assert info.value.code == "file_too_large"
    assert "line and limit" in info.value.message
    assert await env.read_text(str(big), line=40_000, limit=2) == "line 40000\nline 40001\n"


async def test_writes_through_a_link_out_of_the_workspace_are_refused(
    local_env: LocalEnvironment, project: Path, outside: Path
) -> None:
    (project / "escape").symlink_to(outside / "secret.txt")
    for path in ("escape", str(outside / "secret.txt"), "../outside/secret.txt"):
        with pytest.raises(WorkspaceError) as info:
            await local_env.write_text(path, "pwned")
        assert info.value.code == "outside_workspace"
        with pytest.raises(WorkspaceError):
            await local_env.read_text(path)
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


async def test_run_merges_output_and_reports_the_exit_code(
    local_env: LocalEnvironment, project: Path
) -> None:
    result = await local_env.run(
        "echo out; echo err >&2; pwd; exit 3",
        cwd=str(project / "src"),
        timeout_s=10,
        output_limit=10_000,
    )
    assert result.exit_code == 3
    assert not result.timed_out and not result.truncated
    assert result.output.splitlines() == ["out", "err", str(project / "src")]


async def test_run_keeps_the_last_bytes_when_output_is_too_large(
    local_env: LocalEnvironment, project: Path
) -> None:
    result = await local_env.run("seq 1 100000", cwd=str(project), timeout_s=10, output_limit=1000)
    assert result.truncated and result.exit_code == 0
    assert len(result.output.encode()) <= 1000
    assert result.output.endswith("100000\n")


async def test_run_refuses_a_cwd_outside(local_env: LocalEnvironment, outside: Path) -> None:
    with pytest.raises(WorkspaceError) as info:
        await local_env.run("true", cwd=str(outside), timeout_s=5, output_limit=100)
    assert info.value.code == "outside_workspace"


def _read_pid(pid_file: Path) -> int | None:
    text = pid_file.read_text() if pid_file.exists() else ""
    return int(text) if text.strip() else None


async def _group_of(pid_file: Path) -> int:
    """The shell's pid (= its process group) once the command has written it."""
    with anyio.fail_after(5):
        while (pid := _read_pid(pid_file)) is None:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return pid


async def test_timeout_kills_the_whole_process_group(
    local_env: LocalEnvironment, project: Path
) -> None:
    pid_file = project / "pgid"
    started = anyio.current_time()
    result = await local_env.run(
        f"echo $$ > {pid_file}; sleep 30 & sleep 30; echo never",
        cwd=str(project),
        timeout_s=0.5,
        output_limit=1000,
    )
    assert anyio.current_time() - started < 5
    assert result.timed_out and result.exit_code is None
    assert "never" not in result.output
    assert await members_after_kill(await _group_of(pid_file)) == []


async def test_cancelling_a_command_kills_the_whole_process_group(
    local_env: LocalEnvironment, project: Path
) -> None:
    pid_file = project / "pgid"
    outcome: list[object] = []

    async def run() -> None:
        outcome.append(
            await local_env.run(
                f"echo $$ > {pid_file}; sleep 30 & sleep 30",
                cwd=str(project),
                timeout_s=60,
                output_limit=1000,
            )
        )

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            pgid = await _group_of(pid_file)
            assert len(live_group_members(pgid)) >= 2
            tg.cancel_scope.cancel()
    assert outcome == []
    assert await members_after_kill(pgid) == []


async def test_background_children_do_not_outlive_a_finished_command(
    local_env: LocalEnvironment, project: Path
) -> None:
    pid_file = project / "pgid"
    with anyio.fail_after(10):
        result = await local_env.run(
            f"echo $$ > {pid_file}; sleep 30 & echo done",
            cwd=str(project),
            timeout_s=20,
            output_limit=1000,
        )
    assert result.exit_code == 0 and result.output == "done\n"
    assert await members_after_kill(await _group_of(pid_file)) == []


async def test_run_argv_reports_a_missing_program(project: Path) -> None:
    with pytest.raises(WorkspaceError) as info:
        await run_argv(["/nonexistent/program"], cwd=str(project), timeout_s=5, output_limit=100)
    assert info.value.code == "spawn_failed"


async def test_a_swap_to_a_symlink_right_after_the_check_is_refused(
    local_env: LocalEnvironment,
    project: Path,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The race itself: the file becomes a link out between `resolve` and the open."""
    from steerable_bridge.adapters.tools.paths import Workspace

    checked = Workspace.resolve

    def resolve_then_swap(self: Workspace, path: str) -> str:
        real = checked(self, path)
        target = Path(real)
        if target.name == "app.py" and not target.is_symlink():
            target.unlink(missing_ok=True)
            target.symlink_to(outside / "secret.txt")
        return real

    monkeypatch.setattr(Workspace, "resolve", resolve_then_swap)
    with pytest.raises(WorkspaceError) as info:
        await local_env.read_text("src/app.py")
    assert info.value.code == "outside_workspace"
    (project / "src" / "app.py").unlink()
    with pytest.raises(WorkspaceError) as info:
        await local_env.write_text("src/app.py", "pwned")
    assert info.value.code == "outside_workspace"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


async def test_a_hard_link_out_of_the_workspace_is_replaced_not_written_through(
    local_env: LocalEnvironment, project: Path, outside: Path
) -> None:
    """A file in the project that is a hard link to one outside: writing it must leave the
    outside file as it was (the project's entry gets new content of its own)."""
    linked = project / "linked.txt"
    linked.hardlink_to(outside / "secret.txt")
    assert linked.stat().st_nlink == 2
    (outside / "secret.txt").chmod(0o640)
    await local_env.write_text("linked.txt", "new content\n")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert linked.read_text() == "new content\n"
    assert linked.stat().st_nlink == 1 and (outside / "secret.txt").stat().st_nlink == 1
    assert linked.stat().st_mode & 0o777 == 0o640  # the permission bits are kept
    assert sorted(os.listdir(project)) == ["README.md", "linked.txt", "src"]


async def test_a_hard_link_in_a_read_only_folder_is_refused(
    local_env: LocalEnvironment, project: Path, outside: Path
) -> None:
    folder = project / "locked"
    folder.mkdir()
    linked = folder / "linked.txt"
    linked.hardlink_to(outside / "secret.txt")
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):  # pragma: no cover - root ignores the mode
            pytest.skip("running as root: a read-only folder is still writable")
        with pytest.raises(WorkspaceError) as info:
            await local_env.write_text("locked/linked.txt", "pwned")
        assert info.value.code == "hard_linked"
        assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    finally:
        folder.chmod(0o755)
