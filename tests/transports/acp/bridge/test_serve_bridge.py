"""`serve --acp-agent` end to end: our own ACP agent as the child, AG-UI over HTTP.

Each test starts the real command, drives it with RunAgentInput bodies and checks what an
AG-UI client sees (and, for tools, what lands in the workspace)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.transports.acp.bridge.harness import (
    Bridge,
    bridged,
    child_command,
    env,
    kinds,
    last,
    resume,
    run_input,
    serving,
    text_of,
    write_script,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

WRITE = {
    "tool_calls": [
        {"id": "c1", "name": "write_file", "arguments": {"path": "note.txt", "content": "hi"}}
    ]
}


def test_a_text_turn_streams_the_childs_reasoning_text_and_usage(tmp_path: Path) -> None:
    rounds = [
        {
            "reasoning": "let me think",
            "text": "Hello from the bridged agent",
            "usage": {"prompt_tokens": 12, "completion_tokens": 6},
        }
    ]
    with bridged(tmp_path, rounds) as bridge:
        events = bridge.run(run_input("t1", "r1", "hi"))
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    assert text_of(events) == "Hello from the bridged agent"
    assert "REASONING_MESSAGE_CONTENT" in kinds(events)
    assert events[-1]["outcome"] == {"type": "success"}
    assert events[-1]["usage"][0]["inputTokens"] == 12
    assert events[0]["metadata"]["steerable"]["model"] == "acp-agent:steerable_bridge"


def test_a_permission_interrupt_resumed_with_approval_runs_the_tool_in_the_child(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    rounds = [WRITE, {"text": "Wrote the note."}]
    with bridged(tmp_path, rounds, workspace=workspace) as bridge:
        first = bridge.run(run_input("t1", "r1", "write a note"))
        outcome = first[-1]["outcome"]
        assert outcome["type"] == "interrupt", first[-1]
        assert [i["id"] for i in outcome["interrupts"]] == ["approval-c1"]
        assert "TOOL_CALL_START" in kinds(first)
        assert not (workspace / "note.txt").exists()
        second = bridge.run(run_input("t1", "r2", resume=resume("c1", approved=True)))
    assert second[-1]["outcome"] == {"type": "success"}
    assert (workspace / "note.txt").read_text() == "hi"  # written through the bridge's fs
    result = last(second, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == "c1"
    assert text_of(second) == "Wrote the note."


def test_reject_and_stop_ends_the_run_rejected_and_the_tool_never_runs(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with bridged(tmp_path, [WRITE, {"text": "unused"}], workspace=workspace) as bridge:
        bridge.run(run_input("t1", "r1", "write a note"))
        second = bridge.run(run_input("t1", "r2", resume=resume("c1", approved=False, stop=True)))
    finished = second[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["metadata"]["steerable"]["stop_reason"] == "rejected"
    assert not (workspace / "note.txt").exists()
    assert "unused" not in text_of(second)


def test_stopping_mid_stream_cancels_the_childs_prompt(tmp_path: Path) -> None:
    slow = {"text": "a" * 400, "chunk_size": 4, "delay_ms": 100}
    with bridged(tmp_path, [slow, {"text": "after the cancel"}]) as bridge:
        for event in bridge.stream(run_input("t1", "r1", "go slowly")):
            if event["type"] == "TEXT_MESSAGE_CONTENT":
                break  # leaving the stream disconnects: the server cancels the turn
        # the child was told session/cancel: it is idle again and takes the next prompt
        events = bridge.run(run_input("t1", "r2", "and now?"))
    assert events[-1]["outcome"] == {"type": "success"}, events[-1]
    assert text_of(events) == "after the cancel"


def test_a_child_killed_mid_turn_fails_the_run_clearly_and_the_next_run_works(
    tmp_path: Path,
) -> None:
    slow = {"text": "one two three four five", "chunk_size": 4, "delay_ms": 150}
    with bridged(tmp_path, [slow], loop=True) as bridge:
        first_pid = bridge.child_pid()
        events = []
        for event in bridge.stream(run_input("t1", "r1", "start")):
            events.append(event)
            if event["type"] == "TEXT_MESSAGE_CONTENT" and {"type": "killed"} not in events:
                os.kill(first_pid, signal.SIGKILL)
                events.append({"type": "killed"})
        error = events[-1]
        assert error["type"] == "RUN_ERROR", kinds(events)
        assert error["code"] == "acp_agent_exited"
        assert "exited during this run" in error["message"]
        assert "send the message again" in error["message"]
        again = bridge.run(run_input("t1", "r2", "again"))
        assert bridge.child_pid() != first_pid
    assert again[-1]["outcome"] == {"type": "success"}, again[-1]
    assert text_of(again) == "one two three four five"
    # the new agent process did not know the old session: the log says so
    notes = [e for e in again if e.get("name") == "steerable.hook_action"]
    assert notes and notes[0]["value"]["action"] == "new_agent_session"


def test_a_thread_continues_in_the_same_child_session_after_serve_restarts(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, [{"text": "noted"}], loop=True)
    child_store = tmp_path / "child.sqlite"
    command = child_command(script, storage=str(child_store))
    args = ["--storage", str(tmp_path / "bridge.sqlite")]
    with serving(args, command) as bridge:
        first = bridge.run(run_input("t1", "r1", "remember apples"))
    opened = [e for e in first if e.get("name") == "steerable.config_changed"]
    child_session = next(
        e["value"]["value"] for e in opened if e["value"]["option_id"] == "acp.session"
    )
    with serving(args, command) as bridge:
        second = bridge.run(run_input("t1", "r2", "what did I say?"))
    assert second[-1]["outcome"] == {"type": "success"}, second[-1]
    assert text_of(second) == "noted"
    names = [e.get("name") for e in second]
    assert "steerable.hook_action" not in names  # no new agent session was needed
    # the child's own store holds one session with both prompts: it was resumed, not replaced
    shown = subprocess.run(
        [sys.executable, "-m", "steerable_bridge", "sessions", "show", child_session,
         "--storage", str(child_store), "--json"],
        capture_output=True, text=True, env=env(), timeout=60, check=True,
    )  # fmt: skip
    record = json.loads(shown.stdout)
    assert record["title"] == "remember apples"
    assert record["messages"] == 4  # both prompts and both answers


def test_a_command_runs_in_a_terminal_the_bridge_serves_inside_the_workspace(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "data.txt").write_text("forty-two\n")
    run = {
        "tool_calls": [
            {"id": "r1", "name": "run_command", "arguments": {"command": "cat data.txt"}}
        ]
    }
    with bridged(tmp_path, [run, {"text": "It says forty-two."}], workspace=workspace) as bridge:
        first = bridge.run(run_input("t1", "r1", "what is in data.txt?"))
        assert first[-1]["outcome"]["type"] == "interrupt"
        second = bridge.run(run_input("t1", "r2", resume=resume("r1", approved=True)))
    result = last(second, "TOOL_CALL_RESULT")
    assert "forty-two" in result["content"]
    assert text_of(second) == "It says forty-two."


def test_a_steer_during_the_childs_answer_reaches_it_and_is_answered(tmp_path: Path) -> None:
    slow = {"text": "b" * 200, "chunk_size": 4, "delay_ms": 60}
    with bridged(tmp_path, [slow, {"text": "Steered."}]) as bridge:
        events = []
        for event in bridge.stream(run_input("t1", "r1", "start")):
            events.append(event)
            if event["type"] == "TEXT_MESSAGE_CONTENT" and {"type": "steered"} not in events:
                steer = run_input(
                    "t1", "s1", "change course", forwardedProps={"steerable": {"steer": True}}
                )
                answer = bridge.client.post(bridge.url, json=steer)
                assert "steerable.steer_absorbed" in answer.text
                events.append({"type": "steered"})
    names = kinds(events)
    assert "steerable.steer_applied" in names
    assert names.index("steerable.steer_applied") > names.index("steered")
    assert text_of(events).endswith("Steered.")
    assert events[-1]["outcome"] == {"type": "success"}


def test_a_new_message_instead_of_an_answer_withdraws_the_request_and_is_answered(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    rounds = [WRITE, {"text": "Sure, something else."}]
    with bridged(tmp_path, rounds, workspace=workspace) as bridge:
        bridge.run(run_input("t1", "r1", "write a note"))
        second = bridge.run(run_input("t1", "r2", "no, do something else"))
    assert second[-1]["outcome"] == {"type": "success"}, second[-1]
    assert text_of(second) == "Sure, something else."
    assert not (workspace / "note.txt").exists()
    resolved = [e for e in second if e.get("name") == "steerable.permission_resolved"]
    assert [e["value"]["outcome"] for e in resolved] == ["cancelled"]


def test_check_agui_finds_no_failure_on_a_bridged_endpoint(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    look = {
        "text": "Let me look.",
        "tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {}}],
    }
    with bridged(tmp_path, [look, {"text": "Done."}], workspace=workspace) as bridge:
        checked = subprocess.run(
            [sys.executable, "-m", "steerable_bridge", "check", "agui", bridge.url],
            capture_output=True,
            text=True,
            env=env(),
            timeout=90,
            check=False,
        )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert " 0 failed" in checked.stdout


def test_an_approval_after_serve_restarted_says_the_request_is_gone(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = write_script(tmp_path, [WRITE, {"text": "Fresh start."}])
    command = child_command(script)
    args = ["--storage", str(tmp_path / "bridge.sqlite"), "--workspace", str(workspace)]
    with serving(args, command) as bridge:
        first = bridge.run(run_input("t1", "r1", "write a note"))
    assert first[-1]["outcome"]["type"] == "interrupt"
    with serving(args, command) as bridge:
        late = bridge.run(run_input("t1", "r2", resume=resume("c1", approved=True)))
        error = late[-1]
        assert error["type"] == "RUN_ERROR" and error["code"] == "acp_agent_request_lost"
        assert "send your message again" in error["message"]
        again = bridge.run(run_input("t1", "r3", "write a note"))
    assert not (workspace / "note.txt").exists()
    assert again[-1]["outcome"]["type"] == "interrupt"  # asked again, in a new agent session


def test_the_bridge_and_its_child_on_the_default_storage_list_only_their_own(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, [{"text": "noted"}], loop=True)
    child = shlex.join(
        [sys.executable, "-m", "steerable_bridge", "acp", "--model", f"scripted:{script}"]
    )  # our own agent, on the default storage too
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    with serving([], child, environ=state) as bridge:
        first = bridge.run(run_input("t1", "r1", "remember apples"))
    assert first[-1]["outcome"] == {"type": "success"}, first[-1]
    opened = [e for e in first if e.get("name") == "steerable.config_changed"]
    child_session = next(
        e["value"]["value"] for e in opened if e["value"]["option_id"] == "acp.session"
    )

    def listed(*args: str) -> list[str]:
        shown = subprocess.run(
            [sys.executable, "-m", "steerable_bridge", "sessions", "list", "--json", *args],
            capture_output=True, text=True, env={**env(), **state}, timeout=60, check=True,
        )  # fmt: skip
        return [s["session_id"] for s in json.loads(shown.stdout)["sessions"]]

    assert listed() == [child_session]  # the default store: the native agent's session only
    own = tmp_path / "state/steerable-bridge/bridges/acp-agent_steerable_bridge/sessions.db"
    assert listed("--storage", str(own)) == ["t1"]  # the bridge's thread, in its own store


def _settings(mode: str | None = None, **config: object) -> dict[str, object]:
    own: dict[str, object] = {"config": config}
    if mode is not None:
        own["mode"] = mode
    return {"forwardedProps": {"steerable": own}}


def test_a_mode_in_forwarded_props_switches_the_childs_mode_and_an_unknown_one_is_422(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with bridged(tmp_path, [WRITE, {"text": "I may not write"}], workspace=workspace) as bridge:
        refused = bridge.client.post(bridge.url, json=run_input("t1", "r0", **_settings("yolo")))
        assert refused.status_code == 422, refused.text
        body = refused.json()["error"]
        assert body["code"] == "unknown_mode"
        assert "read-only" in body["message"] and "accept-edits" in body["message"]
        events = bridge.run(run_input("t1", "r1", "write a note", **_settings("read-only")))
    changed = [e["value"]["mode_id"] for e in events if e.get("name") == "steerable.mode_changed"]
    assert changed == ["read-only"]
    # the child itself is in read-only now: it refused the write without asking anyone
    assert events[-1]["outcome"] == {"type": "success"}, events[-1]
    assert not (workspace / "note.txt").exists()
    assert text_of(events) == "I may not write"


def test_a_config_option_the_child_lacks_or_a_value_it_lacks_is_422(tmp_path: Path) -> None:
    with bridged(tmp_path, [{"text": "fine"}], loop=True) as bridge:
        unknown = bridge.client.post(
            bridge.url, json=run_input("t1", "r0", **_settings(effort="high"))
        )
        wrong = bridge.client.post(
            bridge.url, json=run_input("t1", "r1", **_settings(model="nope:none"))
        )
        events = bridge.run(run_input("t1", "r2", "hi"))
        health = bridge.client.get(bridge.url.removesuffix("/agent") + "/health").json()
        switched = bridge.run(run_input("t1", "r3", "hi again", **_settings(model="demo:default")))
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "unknown_option"
    assert "'effort'" in unknown.json()["error"]["message"] and "model" in unknown.text
    assert wrong.status_code == 422 and "scripted:" in wrong.json()["error"]["message"]
    assert events[-1]["outcome"] == {"type": "success"}  # nothing was broken by the refusals
    # what /health says the bridged agent can do: the child's modes; no fork
    assert health["capabilities"] == {"load": True, "fork": False, "list": True, "steer": True}
    assert health["modes"] == ["default", "accept-edits", "read-only"]
    # a value it has switches the child's model: the demo model answers, not the script
    changed = [e["value"] for e in switched if e.get("name") == "steerable.config_changed"]
    assert {"option_id": "acp.option.model", "value": "demo:default"} in [
        {k: v for k, v in c.items() if k in ("option_id", "value")} for c in changed
    ]
    assert switched[-1]["outcome"] == {"type": "success"}
    assert text_of(switched) and text_of(switched) != "fine"


def _threads(bridge: Bridge) -> list[str]:
    """Every thread `GET /agent/threads` lists, page after page."""
    ids: list[str] = []
    cursor = None
    for _ in range(10):
        params = {"cursor": cursor} if cursor else None
        reply = bridge.client.get(bridge.url + "/threads", params=params)
        assert reply.status_code == 200, reply.text
        ids += [t["threadId"] for t in reply.json()["threads"]]
        cursor = reply.json().get("nextCursor")
        if not cursor:
            return ids
    raise AssertionError(f"the listing did not end: {ids}")


def test_the_childs_own_sessions_are_listed_as_threads_and_one_continues_by_its_id(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, [{"text": "noted"}], loop=True)
    child_store = tmp_path / "child.sqlite"
    earlier = subprocess.run(
        [sys.executable, "-m", "steerable_bridge", "run", "--storage", str(child_store),
         "--model", f"scripted:{script}", "--no-workspace", "an old topic"],
        capture_output=True, text=True, env=env(), timeout=60, check=True,
    )  # fmt: skip
    own = re.search(r"session: (\S+) ", earlier.stderr)
    assert own is not None, earlier.stderr
    own_session = own.group(1)  # the agent's own session, which the bridge never saw
    command = child_command(script, storage=str(child_store))
    args = ["--storage", str(tmp_path / "bridge.sqlite")]
    with serving(args, command) as bridge:
        bridge.run(run_input("t1", "r1", "remember apples"))
        listed = _threads(bridge)
        continued = bridge.run(run_input(own_session, "r2", "what was it?"))
        after = _threads(bridge)
    # ours first, then the agent's own; the child session t1 runs in is not listed twice
    assert listed == ["t1", own_session]
    assert continued[-1]["outcome"] == {"type": "success"}, continued[-1]
    assert "steerable.hook_action" not in [e.get("name") for e in continued]
    assert sorted(after) == sorted(["t1", own_session])  # now a thread of ours, listed once
    shown = subprocess.run(
        [sys.executable, "-m", "steerable_bridge", "sessions", "show", own_session,
         "--storage", str(child_store), "--json"],
        capture_output=True, text=True, env=env(), timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(shown.stdout)["messages"] == 4  # the old prompt and this one, answered
    with serving(args, command) as bridge:  # a new server reads which sessions are mapped
        assert sorted(_threads(bridge)) == sorted(["t1", own_session])
