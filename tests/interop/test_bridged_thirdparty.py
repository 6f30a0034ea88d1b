"""Both bridges proven on real third-party software, each on the local fake model servers.

`serve --acp-agent` runs a real ACP agent (claude-agent-acp, codex-acp, fast-agent;
`thirdparty.py`) as its child, with a SQLite store, and is driven by the official
`@ag-ui/client` (`agui_client.mjs`) and by CopilotKit (its runtime and `@copilotkit/core`,
`copilotkit_client.mjs`), each in its `--bridged` mode on a thread of its own, one client
after the other: a text turn; a `[use-a-tool]` turn whose permission request becomes the
run's interrupt, approved with `resume` (the after-tool text comes back, the tool result
reached the model); a long answer the client aborts (the agent must hang up on the fake
model: `session/cancel` reached it) followed by a turn that works; then `serve` is restarted
on the same store and both clients continue their threads: the model request for the new
message must carry the exchange from before the restart. The serve process gets the
launch's isolated environment (HOME, config folders, the fake's URL and key), which its
child inherits. `acp --agui-url` runs in front of a real AG-UI server (pydantic-ai,
LangGraph), driven by the official TypeScript ACP client (`acp_client.mjs` with
`ACP_AGUI_URL`: text, then the server's own `lookup` tool as tool_call / tool_call_update,
then `session/load` in a new `acp` process replaying both turns) and by acpx (a named
session continued by another agent process with `session/resume`, text then the tool); the
model request of each second prompt must carry the first exchange. Without node, the npm
packages, uv or (for fast-agent) Python 3.12, the tests skip with a warning.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.interop.fake_models import FakeModel, FakeModelServer
from tests.interop.thirdparty import AgentLaunch, read_line

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SERVE = [sys.executable, "-m", "steerable_bridge", "serve", "--port", "0"]
HERE = Path(__file__).resolve().parent
DRIVER_TIMEOUT_S = 150.0
"""How long a node client may take for the turns of one side of the restart."""
CUT_WAIT_S = 30.0
"""Safety bound on waiting for the fake to see the clients' cancels hang up on it."""
NODE_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin"),
    "COPILOTKIT_TELEMETRY_DISABLED": "true",
    "DO_NOT_TRACK": "1",
}


@contextmanager
def bridged(launch: AgentLaunch, log: Path, storage: Path) -> Iterator[str]:
    """`serve --acp-agent LAUNCH --workspace WS --storage DB` in the launch's environment;
    yields the endpoint URL once it answers, and stops the server (its child with it) after
    the block."""
    args = ["--acp-agent", launch.command_line, "--workspace", str(launch.workspace)]
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [*SERVE, "--storage", str(storage), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**launch.env, "STEERABLE_DEMO_PACE_MS": "0"},
            cwd=launch.workspace,
            text=True,
        )
        try:
            first = read_line(process, 60)
            assert first.startswith("steerable-bridge: AG-UI endpoint POST http://"), (
                first + log.read_text()
            )
            url = first.split()[-1]
            with httpx.Client(timeout=10) as client:
                for _ in range(400):  # bound before the line is printed; listening just after
                    try:
                        client.get(url.removesuffix("/agent") + "/health")
                        break
                    except httpx.TransportError:
                        time.sleep(0.05)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


class Driver:
    """One node client (`agui_client.mjs` or `copilotkit_client.mjs`) in its `--bridged` mode:
    given the endpoint URL (`serve_at`) it prints one JSON line for the turns before the
    restart, then given the restarted server's URL one for the turn after it. Started before
    the server, so node loads its modules while the agent starts."""

    def __init__(self, node: str, script: str, fake: FakeModel, tmp: Path) -> None:
        self.tag = script.removesuffix("_client.mjs")
        self.stderr = (tmp / f"{self.tag}.stderr").open("w+")
        self.process = subprocess.Popen(
            [
                node,
                script,
                "--bridged",
                self.tag,
                fake.trigger,
                fake.long_marker,
                fake.long_text[:5],
            ],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env={**NODE_ENV, "HOME": str(tmp)},
        )

    def report(self) -> dict[str, Any]:
        line = read_line(self.process, DRIVER_TIMEOUT_S)
        self.stderr.seek(0)
        assert line, f"{self.tag} printed nothing:\n{self.stderr.read()[-4000:]}"
        report: dict[str, Any] = json.loads(line)
        return report

    def serve_at(self, url: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(url + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self.stderr.close()


def _ended_well(run: Mapping[str, Any], why: str) -> None:
    """A run the client saw end normally: RUN_STARTED .. RUN_FINISHED, no error."""
    assert run["error"] is None, why
    assert run["types"][0] == "RUN_STARTED" and run["types"][-1] == "RUN_FINISHED", why
    assert "RUN_ERROR" not in run["types"], why


@pytest.fixture(params=["claude_acp", "codex_acp", "fast_agent_acp"])
def agent(request: pytest.FixtureRequest) -> AgentLaunch:
    launch: AgentLaunch = request.getfixturevalue(request.param)
    return launch


def test_official_clients_drive_a_real_acp_agent_behind_serve_across_a_restart(
    agent: AgentLaunch, fake_models: FakeModelServer, tmp_path: Path, node: str
) -> None:
    fake = fake_models.model
    storage = tmp_path / "sessions.db"
    logs = [tmp_path / "serve-1.log", tmp_path / "serve-2.log"]
    scripts = ("agui_client.mjs", "copilotkit_client.mjs")
    drivers = [Driver(node, script, fake, tmp_path) for script in scripts]
    before: list[dict[str, Any]] = []
    try:
        with bridged(agent, logs[0], storage) as url:
            for driver in drivers:  # one client after the other
                driver.serve_at(url)
                before.append(driver.report())
            # counted while serve runs: its shutdown ends the agent's processes, and with
            # them any answer still streaming (claude's background requests, say)
            cut = fake.await_cut_short(len(drivers), CUT_WAIT_S)
        with bridged(agent, logs[1], storage) as url:
            for driver in drivers:
                driver.serve_at(url)
            after = [driver.report() for driver in drivers]
    finally:
        for driver in drivers:
            driver.close()
    served = "\n".join(log.read_text()[-3000:] for log in logs)
    for driver, first, second in zip(drivers, before, after, strict=True):

        def why(what: object, tag: str = driver.tag) -> str:
            return f"{agent.name} {agent.version} via {tag}: {what}\n{served}"

        assert first.get("warnings", []) == [] and first.get("errors", []) == [], why(first)
        assert second.get("warnings", []) == [] and second.get("errors", []) == [], why(second)
        hello, asked, approved = first["hello"], first["asked"], first["approved"]
        _ended_well(hello, why(hello))
        assert fake.text in hello["text"], why(hello)

        # The agent's permission request is the run's interrupt; `resume` approves it.
        _ended_well(asked, why(asked))
        assert asked["outcome"]["type"] == "interrupt", why(asked)
        assert len(asked["outcome"]["interrupts"]) == 1, why(asked)
        assert "TOOL_CALL_START" in asked["types"], why(asked)
        _ended_well(approved, why(approved))
        assert approved["outcome"] == {"type": "success"}, why(approved)
        assert fake.after_tool in approved["text"], why(approved)

        # Cancel: the client gave up mid-answer without an error of its own (the @ag-ui/client
        # closes an aborted stream with a RUN_ERROR it makes itself), and the next run works.
        cancelled, then = first["cancelled"], first["after"]
        assert cancelled.get("aborted") or cancelled.get("stopped"), why(cancelled)
        assert cancelled["error"] is None, why(cancelled)
        assert "RUN_FINISHED" not in cancelled["types"], why(cancelled)
        _ended_well(then, why(then))
        assert then["outcome"] == {"type": "success"}, why(then)
        if agent.name != "claude-agent-acp":
            # claude-agent-acp 0.23.1 at times answers the prompt right after a cancel at
            # once, with no model request (driven directly too): only the clean end holds.
            assert fake.text in then["text"], why(then)

        # After the restart the thread goes on in the agent's own session: the model
        # request for the new message carries the exchange before the restart.
        continued = second["continued"]
        _ended_well(continued, why(continued))
        assert fake.text in continued["text"], why(continued)
        (request,) = [
            r for r in fake.requests if f"After the restart ({driver.tag})." in r.last_user_text
        ]
        carried = json.dumps(request.body)
        assert f"Say hello ({driver.tag})." in carried, why(carried[-2000:])
        assert fake.after_tool in carried, why(carried[-2000:])
    # Each cancel reached the model: the agent got session/cancel and hung up on the fake.
    assert cut == len(drivers), served
    assert fake.saw_tool_result(), "no tool result ever reached the model"
    if agent.name != "fast-agent":  # its tool is the MCP `lookup`, which writes nothing
        assert (agent.workspace / "fake-model-was-here.txt").exists()


ACPX = HERE / "node_modules" / "acpx" / "dist" / "cli.js"


def _acp_env(tmp: Path, storage: Path) -> dict[str, str]:
    """What `acp --agui-url` runs with: no machine settings, its store in `tmp`."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")},
        "HOME": str(home),
        "XDG_STATE_HOME": str(tmp / "state"),
        "STEERABLE_STORAGE": str(storage),
        "PYTHONPATH": str(HERE.parent.parent),
    }


@contextmanager
def _typescript_client(
    node: str, url: str, prompts: list[str], tmp: Path
) -> Iterator[Callable[[], dict[str, Any]]]:
    """`acp_client.mjs` in its bridged mode (two `acp` processes), run while the block runs;
    yields the function that waits (bounded) for its JSON report."""
    env = {
        **_acp_env(tmp, tmp / "ts-sessions.db"),
        "ACP_PYTHON": sys.executable,
        "ACP_CWD": str(tmp),
        "ACP_AGUI_URL": url,
        "ACP_PROMPTS": json.dumps(prompts),
    }
    with (tmp / "acp_client.stderr").open("w+") as stderr:
        process = subprocess.Popen(
            [node, str(HERE / "acp_client.mjs")],
            cwd=HERE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )

        def report() -> dict[str, Any]:
            out, _ = process.communicate(timeout=DRIVER_TIMEOUT_S)
            stderr.seek(0)
            assert process.returncode == 0, f"acp_client.mjs failed:\n{stderr.read()[-4000:]}"
            done: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
            return done

        try:
            yield report
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


def _acpx(node: str, agent: str, tmp: Path, *args: str) -> list[dict[str, Any]]:
    """One `acpx` command (JSON output) on `agent` in `tmp/acpx`; the frames it printed."""
    workspace = tmp / "acpx"
    workspace.mkdir(exist_ok=True)
    done = subprocess.run(
        [node, str(ACPX), "--agent", agent, "--cwd", str(workspace), "--ttl", "10",
         "--format", "json", *args],
        cwd=workspace,
        env=_acp_env(tmp, tmp / "acpx-sessions.db"),
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"acpx {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _acpx_turn(frames: list[dict[str, Any]]) -> dict[str, Any]:
    """What one `acpx prompt` saw: methods, stop reason, update kinds, text, call statuses."""
    updates = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    return {
        "methods": {f.get("method") for f in frames},
        "stopReason": [
            f["result"]["stopReason"] for f in frames if "stopReason" in f.get("result", {})
        ],
        "kinds": {u["sessionUpdate"] for u in updates},
        "text": "".join(
            u["content"].get("text", "")
            for u in updates
            if u["sessionUpdate"] == "agent_message_chunk"
        ),
        "statuses": [
            u["status"]
            for u in updates
            if u["sessionUpdate"] == "tool_call_update" and u.get("status")
        ],
    }


@pytest.mark.parametrize("server", ["pydantic_ai_agui", "langgraph_agui"])
def test_acp_clients_drive_acp_agui_in_front_of_a_real_server(
    server: str,
    fake_models: FakeModelServer,
    tmp_path: Path,
    node: str,
    request: pytest.FixtureRequest,
) -> None:
    url: str = request.getfixturevalue(server)
    fake = fake_models.model
    hello, tool = "Say hello ({}).", f"Please {fake.trigger} now ({{}})."

    # The official TypeScript client (in the background, while acpx runs): text, then the
    # server's own `lookup` tool, in one `acp` process; session/load in a second one replays
    # both turns.
    prompts = [hello.format("ts"), tool.format("ts")]
    with _typescript_client(node, url, prompts, tmp_path) as typescript_report:
        # acpx: a named session made by one agent process, prompted through another (acpx's
        # queue owner), which continues it with session/resume (acpx never sends session/load).
        agent = shlex.join([sys.executable, "-m", "steerable_bridge.cli", "acp", "--agui-url", url])
        _acpx(node, agent, tmp_path, "sessions", "new", "--name", "work")
        try:
            said, used = (
                _acpx_turn(
                    _acpx(node, agent, tmp_path, "prompt", "-s", "work", text.format("acpx"))
                )
                for text in (hello, tool)
            )
        finally:
            _acpx(node, agent, tmp_path, "sessions", "close", "work")
        report = typescript_report()
    why = repr([said, used])
    assert "session/resume" in said["methods"], why
    assert said["stopReason"] == ["end_turn"] and fake.text in said["text"], why
    assert used["stopReason"] == ["end_turn"] and fake.after_tool in used["text"], why
    assert {"tool_call", "tool_call_update"} <= used["kinds"], why
    assert used["statuses"][-1] == "completed", why

    said, used = report["turns"]
    why = json.dumps(report, indent=1)
    assert said["stopReason"] == "end_turn" and fake.text in said["text"], why
    assert used["stopReason"] == "end_turn" and fake.after_tool in used["text"], why
    assert {"tool_call", "tool_call_update"} <= set(used["kinds"]), why
    ((call,),) = (used["toolCalls"],)
    assert "lookup" in call["title"] and used["statuses"][-1] == "completed", why
    replay = report["replay"]
    assert replay["users"] == [hello.format("ts"), tool.format("ts")], why
    assert fake.text in replay["text"] and fake.after_tool in replay["text"], why
    assert replay["toolCalls"] == [call["id"]], why

    # The server ran the tool, and each second prompt's model request carried the first.
    for tag in ("ts", "acpx"):
        asked = [r for r in fake.requests if r.last_user_text == tool.format(tag)]
        assert asked and any(r.tool_results for r in asked), [r.path for r in fake.requests]
        carried = json.dumps(asked[0].body)
        assert hello.format(tag) in carried and fake.text in carried, carried
