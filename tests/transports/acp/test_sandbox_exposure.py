"""What a tool process can reach of the agent, on the real `steerable-bridge acp` process.

The agent starts with a secret in its environment (`STEERABLE_TEST_SECRET_KEY`). A stdio MCP
server (`mcp_server.py --spy`) reports every environment it can read — its own and every
`/proc/PID/environ` — and under the sandbox the secret is in none of them, while under
`--sandbox off` it is (through the agent's `/proc/PID/environ`: what `off` exposes).
Without bubblewrap (the agent's PATH has none) `--sandbox require` refuses commands and MCP
servers with `sandbox_unavailable`, and `auto` warns at start-up and marks every result
`sandbox: none`. A command that leaves with `setsid` is killed when the command ends, and
when the agent is killed with SIGKILL; so is what an unsandboxed MCP server left running.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import schema as acp

from steerable_bridge.adapters.tools import bwrap
from tests.adapters.tools.test_mcp import SERVER
from tests.transports.acp.harness import AcpRun, running

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SECRET = "sk-" + uuid.uuid4().hex
AGENT_ENV = {"STEERABLE_TEST_SECRET_KEY": SECRET}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def spy() -> acp.McpServerStdio:
    return acp.McpServerStdio(name="spy", command=sys.executable, args=[SERVER, "--spy"], env=[])


def no_bwrap_path(tmp: Path) -> dict[str, str]:
    """A PATH with the usual programs but no `bwrap` (symlinks to everything else)."""
    folder = tmp / "bin"
    folder.mkdir()
    for directory in ("/usr/bin", "/bin"):
        for name in os.listdir(directory):
            target = folder / name
            if name != "bwrap" and not target.exists():
                target.symlink_to(os.path.join(directory, name))
    return {"PATH": str(folder)}


def finished(run: AcpRun, call_id: str) -> Any:
    for update in run.client.updates_of("tool_call_update"):
        if update.tool_call_id == call_id and update.status in ("completed", "failed"):
            return update
    raise AssertionError(f"{call_id} did not finish: {run.client.kinds()}")


def started_sandbox(run: AcpRun, call_id: str) -> Any:
    for update in run.client.updates_of("tool_call_update"):
        if update.tool_call_id == call_id and update.status == "in_progress":
            return update.field_meta["steerable"]["sandbox"]
    raise AssertionError(f"{call_id} never started")


def text_of(update: Any) -> str:
    return "\n".join(c.content.text for c in update.content or () if c.type == "content")


def messages(run: AcpRun) -> str:
    return "".join(u.content.text for u in run.client.updates_of("agent_message_chunk"))


async def spy_report(tmp: Path, sandbox: str) -> tuple[str, Any]:
    project = tmp / "project"
    project.mkdir()
    rounds = [{"tool_calls": [call("m1", "mcp__spy__environ_report")]}, {"text": "done"}]
    args = ("--sandbox", sandbox)
    with anyio.fail_after(60):
        async with running(tmp, rounds, args=args, env=AGENT_ENV) as run:
            await run.init()
            created = await run.conn.new_session(cwd=str(project), mcp_servers=[spy()])
            response = await run.prompt(created.session_id, "spy")
            assert response.stop_reason == "end_turn", run.stderr()[-2000:]
            update = finished(run, "m1")
            assert update.status == "completed", text_of(update)
            report = text_of(update)
            assert "truncated" not in report  # "absent" must mean absent, not cut off
            return report, started_sandbox(run, "m1")


async def test_a_sandboxed_mcp_server_cannot_read_the_agents_secret(tmp_path: Path) -> None:
    if not await bwrap.probe(bwrap.find_bwrap()):
        pytest.skip("bubblewrap cannot create a sandbox on this machine")
    report, sandbox = await spy_report(tmp_path, "require")
    assert sandbox == "bwrap"
    assert "own: [" in report and "ppid: 1" in report  # it ran, in a PID namespace of its own
    assert SECRET not in report
    assert "STEERABLE_TEST_SECRET_KEY" not in report


async def test_unsandboxed_the_secret_leaks_through_the_agents_proc(tmp_path: Path) -> None:
    """What `--sandbox off` exposes (and proof that the spy would see a leak)."""
    report, sandbox = await spy_report(tmp_path, "off")
    assert sandbox == "none"
    own = report.splitlines()[0]
    assert SECRET not in own  # its own environment is still scrubbed
    assert SECRET in report  # ... but the agent's /proc/PID/environ is readable


async def test_require_without_bwrap_refuses_commands_and_mcp_servers(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    rounds = [{"tool_calls": [call("x1", "run_command", command="echo ran")]}, {"text": "ok"}]
    args = ("--sandbox", "require", "--approve", "all")
    env = {**AGENT_ENV, **no_bwrap_path(tmp_path)}
    with anyio.fail_after(60):
        async with running(tmp_path, rounds, args=args, env=env) as run:
            await run.init()
            created = await run.conn.new_session(cwd=str(project), mcp_servers=[spy()])
            await run.prompt(created.session_id, "run it")
            update = finished(run, "x1")
            told = messages(run)
    assert update.status == "failed"
    assert "'code': 'sandbox_unavailable'" in str(update.field_meta)
    assert "apt-get install bubblewrap) or pass --sandbox off" in text_of(update)
    assert "[sandbox_unavailable]" in told and "'spy'" in told
    assert "--sandbox off" in told
    assert "with --sandbox require every command and stdio MCP server will be refused" in (
        run.stderr()
    )


async def test_auto_without_bwrap_warns_and_marks_results_unconfined(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    rounds = [
        {"tool_calls": [call("x1", "run_command", command="echo ran")]},
        {"tool_calls": [call("m1", "mcp__spy__environ_report")]},
        {"text": "ok"},
    ]
    args = ("--sandbox", "auto", "--approve", "all")
    env = {**AGENT_ENV, **no_bwrap_path(tmp_path)}
    with anyio.fail_after(60):
        async with running(tmp_path, rounds, args=args, env=env) as run:
            await run.init()
            created = await run.conn.new_session(cwd=str(project), mcp_servers=[spy()])
            await run.prompt(created.session_id, "run it")
            command, tool = finished(run, "x1"), finished(run, "m1")
            marks = started_sandbox(run, "x1"), started_sandbox(run, "m1")
            stderr = run.stderr()
    assert command.status == "completed" and "ran" in text_of(command)
    assert command.raw_output["sandbox"] == "none"
    assert tool.status == "completed"
    assert marks == ("none", "none")
    warning = [line for line in stderr.splitlines() if "UNSANDBOXED" in line]
    assert len(warning) == 1 and "apt-get install bubblewrap" in warning[0]


def live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


async def gone(pid: int, within_s: float = 15.0) -> bool:
    """Wait (bounded) until `pid` has exited; whether it did."""
    with anyio.move_on_after(within_s):
        while live(pid):  # noqa: ASYNC110 - the kernel's state is the event
            await anyio.sleep(0.02)
    return not live(pid)


def setsid_command(pidfile: Path, then: str = "") -> str:
    """Start a child in a session of its own that writes its pid (once it has left)."""
    inner = f"echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; {then} exec sleep 1000"
    return f"setsid sh -c '{inner}' </dev/null >/dev/null 2>&1 &"


async def test_a_setsid_child_dies_with_its_command_under_sandbox_off(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pidfile = project / "escaped.pid"
    command = f"{setsid_command(pidfile)} while [ ! -e {pidfile} ]; do sleep 0.01; done"
    rounds = [
        {"tool_calls": [call("x1", "run_command", command=command)]},
        {"text": "ok"},
    ]
    args = ("--sandbox", "off", "--approve", "all")
    pid = 0
    try:
        with anyio.fail_after(60):
            async with running(tmp_path, rounds, args=args) as run:
                await run.init()
                sid = await run.new(project)
                await run.prompt(sid, "run it")
                assert finished(run, "x1").status == "completed"
                pid = int(pidfile.read_text())
                assert await gone(pid), "the setsid child outlived its command"
    finally:
        if pid and live(pid):
            os.kill(pid, signal.SIGKILL)


async def test_a_setsid_child_dies_when_the_agent_is_killed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pidfile = project / "escaped.pid"
    announce = f"echo go > {project / 'ready'};"
    command = f"{setsid_command(pidfile, then=announce)} sleep 1000"
    rounds = [{"tool_calls": [call("x1", "run_command", command=command)]}, {"text": "ok"}]
    args = ("--sandbox", "off", "--approve", "all")
    pid = 0
    os.mkfifo(project / "ready")
    ready = os.open(project / "ready", os.O_RDONLY | os.O_NONBLOCK)
    try:
        with anyio.fail_after(60):
            async with running(tmp_path, rounds, args=args) as run:
                await run.init()
                sid = await run.new(project)

                async def prompt() -> None:
                    with contextlib.suppress(ConnectionError):  # the agent is killed mid-turn
                        await run.prompt(sid, "run it")

                async with anyio.create_task_group() as tg:
                    tg.start_soon(prompt)
                    await anyio.wait_readable(ready)
                    pid = int(pidfile.read_text())
                    assert live(pid) and os.getsid(pid) == pid
                    run.process.send_signal(signal.SIGKILL)
                    assert await gone(pid), "the setsid child outlived the agent's SIGKILL"
                    tg.cancel_scope.cancel()
    finally:
        os.close(ready)
        if pid and live(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_no_bwrap_path_really_has_no_bwrap(tmp_path: Path) -> None:
    path = no_bwrap_path(tmp_path)["PATH"]
    assert shutil.which("bwrap", path=path) is None
    assert shutil.which("setsid", path=path) is not None


async def test_an_mcp_servers_setsid_child_dies_when_the_agent_is_killed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    rounds = [{"tool_calls": [call("m1", "mcp__spy__escape")]}, {"text": "ok"}]
    args = ("--sandbox", "off", "--approve", "all")
    pid = 0
    try:
        with anyio.fail_after(60):
            async with running(tmp_path, rounds, args=args) as run:
                await run.init()
                created = await run.conn.new_session(cwd=str(project), mcp_servers=[spy()])
                await run.prompt(created.session_id, "escape")
                pid = int(text_of(finished(run, "m1")))
                assert live(pid) and os.getsid(pid) == pid
                run.process.send_signal(signal.SIGKILL)
                assert await gone(pid), "the MCP server's setsid child outlived the agent"
    finally:
        if pid and live(pid):
            os.kill(pid, signal.SIGKILL)
