"""Interop: the official `@ag-ui/client` 1.0.0 `HttpAgent`, and the chat page in Chromium.

A real uvicorn on 127.0.0.1 (port 0) serves the AG-UI app on the demo model (instant pace)
with a permission-needing `write_file` test tool. `agui_client.mjs` runs every scenario
through `HttpAgent`; this test fails on any `[ag-ui]` console message and checks what the
client itself does not: each run ends with RUN_FINISHED and no RUN_ERROR (except the
scenario that asks for a model error, which must end with exactly one RUN_ERROR).
`agui_browser.mjs` drives the chat page in headless Chromium, one browser for all of it: a
reply with a tool call, an approval answered "Always allow" (the next write is not asked),
markdown with a copied code block, two threads switched in the sidebar, reloads (mid-stream:
the answer goes on), Stop cancelling the turn on the server, an `ask_user` form (a scripted
model asks; the page fills and submits it; the model's next request holds the answer; a
reload keeps it waiting, then answered), and screenshots at desktop and phone width
(test-artifacts/) with the layout measured for sideways overflow. Without node or chromium
the tests are skipped loudly, never passed.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.adapters.llm.demo import DemoProvider
from steerable_bridge.adapters.llm.scripted import Script, ScriptedProvider
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.ports.model import ModelInfo, ModelRequest, ModelStreamItem
from steerable_bridge.transports.agui.app import create_app
from tests.interop.cutting_proxy import cutting_proxy
from tests.transports.agui.harness import agent_for, live_server, session_of

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE.parent.parent / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.anyio


def _chromium_present() -> bool:
    return CHROMIUM.exists()


async def _node_json(*args: str) -> Any:
    with anyio.fail_after(60):
        done = await anyio.run_process(
            list(args), cwd=HERE, check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"{args[1]} failed ({done.returncode}):\n{stderr[-4000:]}"
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


# The model behind ASK_URL: it asks for a poster's details with `ask_user`, then answers.
POSTER_FORM = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "title": "Title"},
        "size": {"type": "string", "title": "Size", "enum": ["small", "large"], "default": "small"},
        "copies": {"type": "integer", "title": "Copies"},
        "rush": {"type": "boolean", "title": "Rush order"},
    },
    "required": ["title"],
}
POSTER_SCRIPT = Script.model_validate(
    {
        "rounds": [
            {
                "tool_calls": [
                    {
                        "id": "ask-1",
                        "name": "ask_user",
                        "arguments": {"message": "What goes on the poster?", "schema": POSTER_FORM},
                    }
                ]
            },
            {"text": "Printing your posters now."},
        ]
    }
)


class _Recorded:
    """A model provider that keeps every request it was sent (what the model saw)."""

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.requests: list[ModelRequest] = []

    @property
    def info(self) -> ModelInfo:
        return self.inner.info

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.requests.append(request)
        return self.inner.stream(request)


@pytest.mark.timeout(90)
async def test_http_agent_runs_every_scenario_cleanly(node: str) -> None:
    async with live_server(create_app(LocalPort(agent_for()))) as url:
        report = await _node_json(node, "agui_client.mjs", f"{url}/agent")
    assert report["warnings"] == []
    runs = {s["name"]: s["runs"] for s in report["scenarios"]}
    for name, scenario in runs.items():
        for run in scenario:
            assert run["types"][0] == "RUN_STARTED", (name, run["types"])
            if name == "model_error":
                assert run["types"][-1] == "RUN_ERROR" and run["types"].count("RUN_ERROR") == 1
                assert "RUN_FINISHED" not in run["types"]
                continue
            assert run["error"] is None, (name, run["error"])
            assert run["types"][-1] == "RUN_FINISHED", (name, run["types"])
            assert "RUN_ERROR" not in run["types"], name
    _, second = runs["chat"]
    assert len(second["messageIds"]) == len(set(second["messageIds"]))
    assert "and again" in second["text"]
    (tool_run,) = runs["reasoning_and_tool"]
    assert "REASONING_MESSAGE_CONTENT" in tool_run["types"] and tool_run["toolCalls"] == [
        "calculate"
    ]
    assert (
        tool_run["results"][0]["status"] == "completed"
        and "42" in tool_run["results"][0]["content"]
    )
    assert "ACTIVITY_SNAPSHOT" in runs["plan"][0]["types"]
    assert runs["shared_state"][0]["state"] == {"count": 1, "demo": "changed"}
    ask, answer = runs["frontend_tool"]
    assert ask["outcome"]["pendingToolCallIds"] and ask["toolCalls"] == ["show_card"]
    assert answer["results"][0]["content"] == "card shown" and "card shown" in answer["text"]
    interrupted, resumed = runs["approval"]
    assert interrupted["outcome"]["type"] == "interrupt"
    assert resumed["results"][0]["status"] == "completed"
    assert resumed["outcome"] == {"type": "success"}


@pytest.mark.timeout(120)
async def test_the_chat_page_in_chromium(node: str) -> None:
    """One browser, two servers (instant and paced demo model): every scenario of the page."""
    if not _chromium_present():
        reason = (
            "chromium is not installed (/usr/bin/chromium): the chat page browser test cannot run"
        )
        warnings.warn(reason, stacklevel=1)
        pytest.skip(reason)
    ARTIFACTS.mkdir(exist_ok=True)
    shots = [ARTIFACTS / "agui-chat-desktop.png", ARTIFACTS / "agui-chat-phone.png"]
    for shot in shots:
        shot.unlink(missing_ok=True)
    slow_agent = agent_for(DemoProvider(pace_ms=40))  # the intro takes seconds to stream
    slow_app = create_app(LocalPort(slow_agent))
    fast_agent = agent_for()
    for route in ("test:m", "test:other"):
        fast_agent.router.offer(route)  # two routes: the page offers a model picker
    asking = _Recorded(ScriptedProvider(POSTER_SCRIPT))
    async with (
        live_server(create_app(LocalPort(fast_agent))) as fast,
        live_server(slow_app) as slow,
        cutting_proxy(slow) as cut,
        live_server(create_app(LocalPort(agent_for(asking)))) as ask,
    ):
        report = await _node_json(
            node, "agui_browser.mjs", f"{fast}/", f"{slow}/", f"{cut}/", str(ARTIFACTS), f"{ask}/"
        )
        stop_thread = report["stop"]["thread"]
        stopped = session_of(slow_app, stop_thread) or await slow_agent.load_session(stop_thread)
    chat = report["chat"]
    assert any("That is how a tool call looks." in text for text in chat["reply"])
    assert any("calculate" in text.lower() and "42" in text for text in chat["tool"])
    assert chat["reasoning"] and not chat["reasoning"][0]["open"]  # collapsed
    assert chat["errors"] == [] and chat["runningCards"] == 0
    # the approval: every option the server offers, a truthful status, the file's diff
    assert chat["options"] == [
        "Allow once", "Always allow", "Reject", "Always reject", "Reject and stop"
    ]  # fmt: skip
    assert chat["waitingStatus"] == "waiting for your approval"
    assert chat["cardWhileAsked"] == "waiting for approval"
    assert chat["diff"] == ["demo-note.txt+ Written by the demo model.\n"]
    # a reload keeps the waiting question, its options and the diff
    assert chat["afterReload"] == {
        "status": "waiting for your approval",
        "options": chat["options"],
        "diff": chat["diff"],
    }
    # "Always allow" answered once: the second write was not asked about
    assert len(chat["approvals"]) == 1 and chat["approvals"][0].endswith("always allowed")
    assert sum("wrote demo-note.txt" in text for text in chat["tool"]) == 2
    assert chat["pickerVisible"] and chat["models"] == ["test:m", "test:other"]
    assert chat["pickedModel"] == ["model test:other · end_turn"]
    assert report["unreachable"] == [
        "server unreachable — is `steerable-bridge serve` running? Start it, then retry."
    ]
    # markdown rendered, its code block copied
    assert chat["markdown"] == {"code": "print(42)\n", "copy": True, "bold": "bold", "raw": False}
    assert chat["copied"] == "print(42)\n"
    # one per run the page saw live: after the reload, resume, write and markdown (the runs
    # before it are drawn from the thread's snapshot, without their timelines)
    assert len(chat["timelines"]) == 3
    assert not chat["timelineOpen"]  # collapsed until clicked
    labels = [row["label"] for row in chat["timelineRows"]]
    assert labels[0].startswith("run · end_turn")
    assert any(label.startswith("tool calculate · completed") for label in labels)
    assert sum(label.startswith("model ") for label in labels) == 2
    assert all(row["duration"].endswith(("ms", " s")) for row in chat["timelineRows"])
    # no sideways overflow at desktop or phone width; the threads behind the menu on a phone
    for name in ("desktop", "phone", "phoneMenu", "phoneAfterPick"):
        box = report[name]
        assert box["scrollWidth"] <= box["innerWidth"], (name, box)
        assert box["bodyScrollWidth"] <= box["innerWidth"] and box["logOverflow"] <= 0, (name, box)
        assert box["wide"] == [], (name, box)
    assert report["desktop"]["sidebarVisible"] and not report["desktop"]["menuVisible"]
    assert not report["phone"]["sidebarVisible"] and report["phone"]["menuVisible"]
    assert report["phoneMenu"]["sidebarVisible"] and not report["phoneAfterPick"]["sidebarVisible"]
    assert all(shot.stat().st_size > 1000 for shot in shots)
    # two threads in the sidebar; switching back shows the first one's history, so does a reload
    first, second = report["firstThread"], report["secondThread"]
    assert first != second and report["sidebar"] == ["hello", "think, then use a tool"]
    users = ["think, then use a tool", "write a note", "write another note"]
    assert report["switched"]["thread"] == first and report["switched"]["users"][:3] == users
    wrote = "wrote demo-note.txt"
    assert report["switched"]["tools"] == ["6 * 7 = 42", wrote, wrote]
    assert report["switched"]["approvals"] == []  # answered: nothing waits, none redrawn
    reloaded = report["reloaded"]
    assert reloaded["thread"] == first and reloaded["users"][:3] == users
    assert reloaded["code"] == ["print(42)\n"] and reloaded["status"] == "idle"
    assert reloaded["threads"] == ["hello", "think, then use a tool"]
    # the second thread deleted (after a second click): the first stays open
    assert report["deleted"]["armed"] == "Delete?"
    assert report["deleted"]["threads"] == ["think, then use a tool"]
    assert report["deleted"]["thread"] == first
    # a reload while the answer streams: it goes on to the end, once
    reload = report["reload"]
    full = reload["after"]
    assert full.startswith("I am the steerable-bridge demo model") and full.endswith("API_KEY.")
    assert len(reload["before"]) < len(full) and full.startswith(reload["before"])
    assert reload["afterReload"]["status"] == "running…"
    assert reload["users"] == ["hello"] and len(reload["assistants"]) == 1
    # a stream cut mid-answer resumes after its last id: the whole answer, nothing twice
    dropped = report["dropped"]
    assert dropped["text"] == full and len(dropped["assistants"]) == 1
    assert dropped["notes"] == ["connection lost — reconnecting…"] and dropped["errors"] == []
    # Stop cancels the turn on the server
    assert report["stop"]["reply"] and "stopped" in report["stop"]["notes"]
    assert "to use a real model" not in report["stop"]["reply"][0].lower()  # cut short
    finished = [e for e in stopped.log.view() if isinstance(e, ev.RunFinished)]
    assert [f.stop_reason for f in finished] == ["cancelled"]
    assert [m for m in report["console"] if m.startswith(("error", "pageerror"))] == []

    # ask_user: the form the model asked for, kept by a reload, filled in and submitted
    question = report["question"]
    fields = [
        {"label": "Title", "tag": "input", "type": "text", "choices": []},
        {"label": "Size", "tag": "select", "type": None, "choices": ["small", "large"]},
        {"label": "Copies", "tag": "input", "type": "number", "choices": []},
        {"label": "Rush order", "tag": "input", "type": "checkbox", "choices": []},
    ]
    waiting = {
        "reason": "What goes on the poster?",
        "fields": fields,
        "buttons": ["Submit", "Decline", "Cancel"],
        "status": "waiting for your answer",
    }
    assert question["asked"] == {**waiting, "card": "waiting for your answer"}
    assert question["afterReload"] == waiting
    answered = question["answered"]
    assert answered["box"] == ["answered: sent"] and answered["disabled"]
    assert [r.strip() for r in answered["reply"]] == ["Printing your posters now."]
    assert answered["card"] == "completed" and len(answered["result"]) == 1
    # reopened from its snapshot: the answer and the reply, no form left waiting
    assert question["reopened"] == {"status": "idle", "box": [], "enabled": 0}
    # the answer reached the model: its next request ends with the submitted form
    _first, after = asking.requests  # the question, then the answer
    answer = after.messages[-1]
    assert answer.role == "tool" and answer.tool_call_id == "ask-1"
    submitted = {"title": "Launch party", "size": "large", "copies": 3, "rush": True}
    assert json.loads(answer.text) == {"action": "accept", "content": submitted}
