"""Escape attempts from a bubblewrap-sandboxed command: each refused or contained.

Every command here runs with `--sandbox require` through `LocalEnvironment.run`, as the
model's `run_command` would, and every result must say `sandbox == "bwrap"`. Skipped
(with the reason) where bubblewrap cannot create a sandbox.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.tools import bwrap, pids_cgroup
from steerable_bridge.adapters.tools.local_env import CommandPolicy, LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.runtime.ports.environment import CommandResult, WorkspaceError

pytestmark = pytest.mark.anyio


@pytest.fixture
async def sandboxed(project: Path) -> LocalEnvironment:
    if not await bwrap.probe(bwrap.find_bwrap()):
        pytest.skip("bubblewrap cannot create a sandbox on this machine")
    return LocalEnvironment(Workspace.of(str(project)), policy=CommandPolicy(sandbox="require"))


async def run(env: LocalEnvironment, command: str, timeout_s: float = 20) -> CommandResult:
    root = env.workspace.cwd
    with anyio.fail_after(timeout_s + 10):
        result = await env.run(command, cwd=root, timeout_s=timeout_s, output_limit=100_000)
    assert result.sandbox == "bwrap"
    return result


def exists(path: str) -> bool:
    return os.path.exists(path)


def processes_mentioning(marker: str) -> list[int]:
    """Pids whose command line contains `marker` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read()
            with open(f"/proc/{entry}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


async def gone(marker: str) -> bool:
    """Wait (at most 5 s) until no process mentions `marker`."""
    with anyio.move_on_after(5):
        while processes_mentioning(marker):  # noqa: ASYNC110 - the kernel's state is the event
            await anyio.sleep(0.05)
        return True
    return False


async def test_the_workspace_is_writable_and_the_rest_is_not(
    sandboxed: LocalEnvironment, project: Path, outside: Path
) -> None:
    result = await run(sandboxed, "echo made > inside.txt && cat inside.txt")
    assert result.exit_code == 0 and result.output == "made\n"
    assert (project / "inside.txt").read_text() == "made\n"
    target = f"/etc/steerable-escape-{uuid.uuid4().hex}"
    refused = await run(sandboxed, f"echo pwned > {target}")
    assert refused.exit_code != 0 and "Read-only file system" in refused.output
    beside_tests = Path(__file__).parent / f"escape-{uuid.uuid4().hex}"
    created = await run(sandboxed, f"touch {beside_tests}")
    # Read-only, or (for a checkout under /tmp) not there at all in the private /tmp.
    assert created.exit_code != 0
    assert "Read-only file system" in created.output or "No such file" in created.output
    assert not beside_tests.exists()
    # The test's folders sit in the host's /tmp, which the sandbox replaces with its own:
    # these writes land in that private /tmp (or fail) and never reach the host.
    for command in (
        f"echo pwned > {outside}/pwned.txt",
        "echo pwned > ../escape.txt",
        f"rm {outside}/secret.txt",
    ):
        await run(sandboxed, command)
    assert not (outside / "pwned.txt").exists() and not exists(target)
    assert not (project.parent / "escape.txt").exists()
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


async def test_tmp_is_private(sandboxed: LocalEnvironment) -> None:
    name = f"steerable-tmp-{uuid.uuid4().hex}"
    result = await run(sandboxed, f"echo scratch > /tmp/{name} && cat /tmp/{name}")
    assert result.exit_code == 0 and result.output == "scratch\n"
    assert not exists(f"/tmp/{name}")


async def test_homes_and_root_are_hidden(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(home))
    if not await bwrap.probe(bwrap.find_bwrap()):
        pytest.skip("bubblewrap cannot create a sandbox on this machine")
    env = LocalEnvironment(Workspace.of(str(project)), policy=CommandPolicy(sandbox="require"))
    result = await run(env, f"cat {home}/.ssh/id_ed25519; ls -A /root; echo end")
    assert "PRIVATE KEY" not in result.output
    assert result.output.splitlines()[-1] == "end"
    assert result.output.count("\n") == 2  # the cat error, then "end": /root lists nothing


PYTHON = os.path.realpath(sys.executable)
"""The interpreter itself, not the venv's link to it: a checkout under /tmp (where the venv
lives) is hidden by the sandbox's private /tmp, the interpreter's own folder is not."""


async def test_loopback_services_are_unreachable_without_network(
    sandboxed: LocalEnvironment, project: Path
) -> None:
    connected: list[bool] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    probe = (
        f"{PYTHON} -c \"import socket; socket.create_connection(('127.0.0.1', {port}),"
        " 3); print('reached')\""
    )

    async def handle(stream: anyio.abc.SocketStream) -> None:
        connected.append(True)
        await stream.aclose()

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        denied = await run(sandboxed, probe)
        assert denied.exit_code != 0 and "reached" not in denied.output
        assert connected == []
        allowed_env = LocalEnvironment(
            Workspace.of(str(project)), policy=CommandPolicy(sandbox="require", network=True)
        )
        allowed = await run(allowed_env, probe)
        assert allowed.exit_code == 0 and "reached" in allowed.output
        tg.cancel_scope.cancel()
    assert connected == [True]


async def test_background_processes_do_not_survive_the_command(
    sandboxed: LocalEnvironment,
) -> None:
    marker = f"{int(uuid.uuid4().int % 10_000)}.{os.getpid()}"
    result = await run(
        sandboxed, f"sleep {marker} & nohup sleep {marker}1 >/dev/null 2>&1 & echo ok"
    )
    assert result.exit_code == 0 and result.output == "ok\n"
    assert await gone(f"sleep {marker}")


async def test_a_timed_out_sandbox_leaves_nothing_behind(sandboxed: LocalEnvironment) -> None:
    marker = f"{int(uuid.uuid4().int % 10_000)}.{os.getpid()}7"
    result = await run(sandboxed, f"sleep {marker} & sleep {marker}", timeout_s=0.5)
    assert result.timed_out and result.exit_code is None
    assert await gone(f"sleep {marker}")


async def test_a_fork_bomb_is_bounded_and_cleaned_up(
    sandboxed: LocalEnvironment, project: Path
) -> None:
    if os.geteuid() == 0 and not pids_cgroup.available():
        pytest.skip("as root without a writable pids cgroup nothing bounds the count; not run")
    name = f"bomb-{uuid.uuid4().hex}.sh"
    (project / name).write_text('"$0" & "$0" & wait\n')
    (project / name).chmod(0o755)
    result = await run(sandboxed, f"./{name}", timeout_s=3)
    assert result.timed_out or result.exit_code is not None
    assert "fork" in result.output.lower() or "resource" in result.output.lower()
    assert await gone(name)


async def test_require_refuses_when_bwrap_is_missing(project: Path) -> None:
    env = LocalEnvironment(
        Workspace.of(str(project)), policy=CommandPolicy(sandbox="require", bwrap_path=None)
    )
    assert await env.sandbox() == "none"
    with pytest.raises(WorkspaceError) as info:
        await env.run("true", cwd=str(project), timeout_s=5, output_limit=100)
    assert info.value.code == "sandbox_unavailable"
    auto = LocalEnvironment(Workspace.of(str(project)), policy=CommandPolicy(bwrap_path=None))
    result = await auto.run("echo plain", cwd=str(project), timeout_s=5, output_limit=100)
    assert result.output == "plain\n" and result.sandbox == "none"


async def test_a_sandboxed_command_cannot_touch_the_agents_own_files(project: Path) -> None:
    # The store (with its -wal) and the state folder (approvals key) inside the project, as
    # with `--storage ./x.db` or a project that is $HOME: the file tools refuse them, and a
    # command the person allowed once must not rewrite the store or read the key either.
    if not await bwrap.probe(bwrap.find_bwrap()):
        pytest.skip("bubblewrap cannot create a sandbox on this machine")
    from steerable_bridge.adapters.tools.agent_files import AgentFiles

    store, wal = project / "x.db", project / "x.db-wal"
    store.write_text("store")
    wal.write_text("wal")
    state = project / "state"
    state.mkdir()
    (state / "approvals.key").write_text("secret")
    private = AgentFiles()
    private.keep_file(str(store), "session store")
    private.keep_tree(str(state), "state folder")
    env = LocalEnvironment(
        Workspace.of(str(project), private=private), policy=CommandPolicy(sandbox="require")
    )
    result = await run(
        env,
        "echo forged > x.db; echo forged > x.db-wal; rm -f x.db; cat state/approvals.key;"
        " echo written > ok.txt; echo done",
    )
    assert "secret" not in result.output
    assert store.read_text() == "store" and wal.read_text() == "wal"
    assert (state / "approvals.key").read_text() == "secret"
    assert (project / "ok.txt").read_text() == "written\n"  # the rest of the project is writable
    assert "done" in result.output


def test_a_servers_own_install_is_shown_even_in_a_hidden_folder(tmp_path: Path) -> None:
    # An MCP server run by a venv's python with a script beside it, both under /tmp (which
    # the sandbox hides): the venv and the script's folder are what it must still see.
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    server = tmp_path / "srv" / "server.py"
    server.parent.mkdir()
    server.write_text("")
    shown = bwrap.program_paths([str(python), str(server), "--flag"], cwd=str(tmp_path))
    assert shown == (str(venv), str(server.parent))
    assert bwrap.program_paths(["no-such-program-here"], cwd=str(tmp_path)) == ()
