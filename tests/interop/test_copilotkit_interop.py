"""Interop: CopilotKit 1.75 (its v2 `CopilotRuntime` and the `@copilotkit/core` client).

CopilotKit is the most deployed AG-UI consumer, and it pins `@ag-ui/client` 0.0.59, whose
RUN_FINISHED outcome schemas are strict. `copilotkit_client.mjs` runs the runtime in Node on
127.0.0.1 (port 0) with two `HttpAgent`s pointing at real uvicorn servers of the AG-UI app
on the demo model (one instant, one paced so a reply can be stopped), and drives it with
`CopilotKitCore` as a web page would: text, a continued thread, reasoning, shared state, a
frontend tool whose handler runs in the client, a model error, stop, and an approval
interrupt answered with `resume`. The client reports every `onError`; the test asserts what
a user of such a page would see.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.llm.demo import DemoProvider
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.transports.agui.app import create_app
from tests.transports.agui.harness import agent_for, live_server, until

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.anyio


async def _report(node: str, *args: str) -> Any:
    with anyio.fail_after(90):
        done = await anyio.run_process(
            [node, "copilotkit_client.mjs", *args],
            cwd=HERE,
            check=False,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"COPILOTKIT_TELEMETRY_DISABLED": "true", "DO_NOT_TRACK": "1", "PATH": "/usr/bin"},
        )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, (
        f"copilotkit_client.mjs failed ({done.returncode}):\n{stderr[-4000:]}"
    )
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def _scenarios(report: Any) -> dict[str, Any]:
    return {s["name"]: s for s in report["scenarios"]}


def _clean(run: Any) -> None:
    """A run the client saw end normally: one RUN_STARTED .. RUN_FINISHED, no error."""
    assert run["error"] is None, run["error"]
    assert run["types"][0] == "RUN_STARTED" and run["types"][-1] == "RUN_FINISHED", run["types"]
    assert "RUN_ERROR" not in run["types"], run["types"]


@pytest.mark.timeout(120)
async def test_copilotkit_runtime_and_core_client_drive_the_endpoint(node: str) -> None:
    fast_app = create_app(LocalPort(agent_for()))
    slow_agent = agent_for(DemoProvider(pace_ms=40))
    slow_app = create_app(LocalPort(slow_agent))
    async with live_server(fast_app) as fast, live_server(slow_app) as slow:
        report = await _report(node, f"{fast}/agent", f"{slow}/agent")
        reloaded = _scenarios(report)["reload_restores_thread"]["runs"][3]
        # A second Node process: a runtime restarted, with none of the threads in its memory.
        after_restart = await _report(
            node, "--restore", f"{fast}/agent", reloaded["threadId"], reloaded["waitingId"]
        )
        slow_threads = slow_app.state.threads
        # The stopped run's client left, so once it ended the server let go of its thread
        # and session: read the session from the store.
        await until(lambda: len(slow_threads) == 0, 5.0)
        (slow_record,) = (await slow_agent.store.list()).records
        slow_session = await slow_agent.load_session(slow_record.session_id)
    assert report["agUiClient"] == "0.0.59"  # the strict client CopilotKit ships
    got = _scenarios(report)
    for name, scenario in got.items():
        if name != "model_error":
            assert scenario["errors"] == [], (name, scenario["errors"])

    first, second = got["text_and_continued_thread"]["runs"]
    _clean(first)
    _clean(second)
    assert "demo model" in first["text"] and "and again" in second["text"]
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["user", "assistant", "user", "assistant"]  # one thread, kept

    (thinking,) = got["reasoning"]["runs"]
    _clean(thinking)
    assert thinking["reasoning"] and "REASONING_MESSAGE_CONTENT" in thinking["types"]

    (stateful,) = got["shared_state"]["runs"]
    _clean(stateful)
    assert stateful["state"] == {"count": 1, "demo": "changed"}

    # The frontend tool: the strict 0.0.59 client accepts the outcome, the handler runs in
    # the client, and CopilotKit's follow-up run carries its result to the model.
    (tool,) = got["frontend_tool"]["runs"]
    assert tool["error"] is None and tool["handled"] == [{}]
    assert tool["types"].count("RUN_STARTED") == 2 and tool["types"][-1] == "RUN_FINISHED"
    assert tool["toolCalls"] == ["show_card"] and tool["results"] == ["card shown"]
    assert "card shown" in tool["text"]

    (failed,) = got["model_error"]["runs"]
    assert failed["types"][-1] == "RUN_ERROR" and "RUN_FINISHED" not in failed["types"]
    (shown,) = got["model_error"]["errors"]
    assert shown["code"] == "agent_run_error_event" and "example error" in shown["message"]

    (stopped,) = got["stop"]["runs"]
    assert (
        stopped["stopped"] and stopped["error"] is None and "RUN_FINISHED" not in stopped["types"]
    )
    finished = [e for e in slow_session.log.view() if isinstance(e, ev.RunFinished)]
    assert [f.stop_reason for f in finished] == ["cancelled"]  # the server stopped the turn

    asked, resumed = got["approval"]["runs"]
    _clean(asked)
    (interrupt,) = asked["outcome"]["interrupts"]
    assert asked["outcome"]["type"] == "interrupt" and interrupt["toolCallId"]
    _clean(resumed)
    assert resumed["results"] == ["wrote demo-note.txt"] and resumed["outcome"] == {
        "type": "success"
    }

    # A page reload: a fresh CopilotKitCore opens the thread by id and gets back every
    # message it had (text, the approved tool call and its result), then continues it.
    hello, asked_note, approved_note, restored, continued = got["reload_restores_thread"]["runs"]
    for done in (hello, asked_note, approved_note, continued):
        _clean(done)
    assert restored["error"] is None
    assert restored["messages"] == restored["before"], (restored["messages"], restored["before"])
    assert [m["role"] for m in restored["messages"]][:2] == ["user", "assistant"]
    assert "tool" in [m["role"] for m in restored["messages"]]
    assert "and again" in continued["text"]
    assert [m["role"] for m in continued["messages"]][-2:] == ["user", "assistant"]

    # After a runtime restart the in-memory runner knows nothing; docs/copilotkit-runner.mjs
    # restores the page from the server's thread snapshot, and the thread goes on there.
    assert after_restart["errors"] == []
    back = after_restart["restored"]
    assert back["error"] is None
    assert [(m["id"], m["role"]) for m in back["messages"]] == [
        (m["id"], m["role"]) for m in continued["messages"]
    ]
    assert [m["content"] for m in back["messages"] if m["role"] == "user"] == [
        m["content"] for m in continued["messages"] if m["role"] == "user"
    ]
    _clean(after_restart["continued"])
    assert "after the restart" in after_restart["continued"]["text"]
    # the thread left waiting for an approval comes back with its interrupt, answered there
    (pending,) = after_restart["pending"]
    assert pending["id"].startswith("approval-") and pending["toolCallId"]
    assert [m["role"] for m in after_restart["waited"]["messages"]] == ["user", "assistant"]
    answered = after_restart["answered"]
    _clean(answered)
    assert answered["results"] == ["wrote demo-note.txt"]
