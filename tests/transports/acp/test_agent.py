"""End-to-end: the real `steerable-bridge acp` process, driven by the ACP SDK's client side.

Each test spawns the agent with a scripted model and checks what an editor would notice:
the methods' answers, the `session/update` stream (order, variants, `_meta`), errors with
stable codes, and that no update follows a prompt's response.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp import schema as acp

from tests.transports.acp.harness import running

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


def _meta(update: Any) -> dict[str, Any]:
    meta: dict[str, Any] = update.field_meta["steerable"]
    return meta


TOOL_ROUND: dict[str, Any] = {
    "reasoning": "Let me plan.",
    "text": "Working on it.",
    "chunk_size": 5,
    "tool_calls": [
        {
            "id": "plan1",
            "name": "update_plan",
            "arguments": {"entries": [{"content": "Add numbers", "status": "in_progress"}]},
        },
        {"id": "calc1", "name": "calculate", "arguments": {"expression": "6*7"}},
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 10},
}
FINAL_ROUND: dict[str, Any] = {
    "text": "The answer is 42.",
    "usage": {"prompt_tokens": 40, "completion_tokens": 5},
}


async def test_initialize_then_bad_requests_get_specific_errors(tmp_path: Path) -> None:
    async with running(tmp_path, [], accepts_images=True) as run:
        first = await run.init()
        again = await run.conn.initialize(protocol_version=7)
        with pytest.raises(RequestError) as relative:
            await run.conn.new_session(cwd="relative/dir", mcp_servers=[])
        with pytest.raises(RequestError) as missing:
            await run.conn.new_session(cwd=str(tmp_path / "nope"), mcp_servers=[])
        with pytest.raises(RequestError) as unknown:
            await run.prompt("sess_missing", "hi")
        await run.conn.cancel(session_id="sess_missing")  # a notification: ignored quietly
        with pytest.raises(RequestError) as mode_error:
            await run.conn.set_session_mode(session_id="sess_missing", mode_id="default")
        with pytest.raises(RequestError) as empty:
            await run.conn.prompt(session_id=await run.new(), prompt=[])
    assert first.protocol_version == 1
    assert again.protocol_version == 1  # unsupported version → the agent's latest
    assert first.agent_info is not None and first.agent_info.name == "steerable-bridge"
    caps = first.agent_capabilities
    assert caps is not None and caps.load_session is True
    assert caps.prompt_capabilities is not None
    assert caps.prompt_capabilities.image is True
    assert caps.prompt_capabilities.audio is False
    assert caps.prompt_capabilities.embedded_context is True
    sc = caps.session_capabilities
    assert sc is not None
    assert None not in (sc.list, sc.resume, sc.close, sc.fork, sc.delete)
    assert [(m.id, getattr(m, "type", "agent")) for m in first.auth_methods] == [
        ("stored-credentials", "agent")  # no terminal method: this client did not offer one
    ]
    assert relative.value.code == missing.value.code == -32602
    assert "absolute" in str(relative.value)
    assert "does not exist" in str(missing.value)
    assert relative.value.data["code"] == "cwd_not_absolute"
    assert unknown.value.code == mode_error.value.code == -32002
    assert "session/list" in str(unknown.value)
    assert empty.value.code == -32602 and empty.value.data["code"] == "empty_prompt"


async def test_missing_api_key_fails_session_new_and_authenticate(tmp_path: Path) -> None:
    env = {"STEERABLE_BASE_URL": "https://models.example.invalid/v1"}
    async with running(tmp_path, model="openai:some-model", env=env) as run:
        init = await run.init()
        with pytest.raises(RequestError) as new_error:
            await run.new()
        with pytest.raises(RequestError) as auth_error:
            await run.conn.authenticate(method_id=init.auth_methods[0].id)
    assert {getattr(m, "type", "agent") for m in init.auth_methods} <= {"agent", "terminal"}
    assert new_error.value.code == auth_error.value.code == -32000
    assert new_error.value.data["variable"] == "STEERABLE_API_KEY"
    assert "steerable-bridge login" in str(new_error.value)
    assert "or set STEERABLE_API_KEY in the agent's environment" in str(new_error.value)
    assert "STEERABLE_API_KEY" in str(auth_error.value)


async def test_prompt_streams_every_editor_update_in_order(tmp_path: Path) -> None:
    async with running(tmp_path, [TOOL_ROUND, FINAL_ROUND], context_window=4096) as run:
        await run.init()
        sid = await run.new()
        response = await run.prompt(sid, "What is six times seven?")
        await run.assert_quiet_after_prompt()
        new_index, _ = run.response_index("session/new")
        first_update = next(
            i for i, e in enumerate(run.wire) if e.message.get("method") == "session/update"
        )
    client = run.client
    assert response.stop_reason == "end_turn"
    assert response.usage is not None and response.usage.output_tokens == 15
    kinds = client.kinds(sid)
    assert kinds[0] == "available_commands_update"
    assert new_index < first_update  # the client knows the session before its first update
    assert client.events == []  # no `_steerable/event` without opting in
    assert not any(m.get("method") == "_steerable/event" for m in run.incoming())
    assert kinds[1] == "session_info_update"
    assert client.updates_of("session_info_update")[0].title == "What is six times seven?"
    thought = "".join(u.content.text for u in client.updates_of("agent_thought_chunk"))
    text = "".join(u.content.text for u in client.updates_of("agent_message_chunk"))
    assert thought == "Let me plan."
    assert text == "Working on it.The answer is 42."
    calls = client.updates_of("tool_call")
    assert [c.tool_call_id for c in calls] == ["plan1", "calc1"]
    assert all(c.status == "pending" for c in calls)
    assert calls[1].kind == "think"
    assert calls[1].raw_input == {"expression": "6*7"}
    assert "6*7" in calls[1].title
    progress = client.updates_of("tool_call_update")
    statuses = [(u.tool_call_id, u.status) for u in progress]
    assert statuses == [
        ("plan1", "in_progress"),
        ("calc1", "in_progress"),
        ("plan1", "completed"),
        ("calc1", "completed"),
    ] or statuses == [
        ("plan1", "in_progress"),
        ("plan1", "completed"),
        ("calc1", "in_progress"),
        ("calc1", "completed"),
    ]
    done = next(u for u in progress if u.tool_call_id == "calc1" and u.status == "completed")
    assert "42" in done.content[0].content.text
    plan = client.updates_of("plan")[0]
    assert [(e.content, e.status) for e in plan.entries] == [("Add numbers", "in_progress")]
    usage = client.updates_of("usage_update")
    assert [(u.used, u.size) for u in usage] == [(30, 4096), (45, 4096)]
    seqs = [_meta(n.update)["seq"] for n in client.updates]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert {_meta(n.update)["run_id"] for n in client.updates[1:]} == {
        response.field_meta["steerable"]["run_id"]
    }


async def test_stop_reasons_map_to_acp(tmp_path: Path) -> None:
    rounds = [
        {"text": "cut", "finish_reason": "max_tokens"},
        {"text": "no", "finish_reason": "refusal"},
        {"tool_calls": [{"id": "c", "name": "calculate", "arguments": {"expression": "1"}}]},
    ]
    async with running(tmp_path, rounds, args=("--max-steps", "1")) as run:
        await run.init()
        sid = await run.new()
        reasons = [(await run.prompt(sid, "go")).stop_reason for _ in range(3)]
    assert reasons == ["max_tokens", "refusal", "max_turn_requests"]


async def test_failed_run_answers_with_a_stable_error_not_end_turn(tmp_path: Path) -> None:
    rounds = [{"text": "partial", "error": {"code": "rate_limited", "message": "wait a minute"}}]
    async with running(tmp_path, rounds) as run:
        await run.init()
        sid = await run.new()
        with pytest.raises(RequestError) as error:
            await run.prompt(sid, "go")
        _, response = run.response_index("session/prompt")
    assert error.value.code == -32011
    assert error.value.data["code"] == "rate_limited"
    assert "wait a minute" in str(error.value)
    assert "result" not in response


async def test_mode_and_model_switches_are_announced(tmp_path: Path) -> None:
    rounds = [{"text": "scripted"}]
    async with running(tmp_path, rounds) as run:
        await run.init()
        new = await run.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = new.session_id
        await run.conn.set_session_mode(session_id=sid, mode_id="read-only")
        with pytest.raises(RequestError) as bad_mode:
            await run.conn.set_session_mode(session_id=sid, mode_id="yolo")
        options = await run.conn.set_config_option(
            session_id=sid, config_id="model", value="demo:default"
        )
        with pytest.raises(RequestError) as bad_model:
            await run.conn.set_config_option(session_id=sid, config_id="model", value="x:y")
        answer = await run.prompt(sid, "hello")
    assert new.modes is not None and new.modes.current_mode_id == "default"
    assert [m.id for m in new.modes.available_modes] == ["default", "accept-edits", "read-only"]
    assert new.config_options is not None
    assert new.config_options[0].category == "model"
    assert [u.current_mode_id for u in run.client.updates_of("current_mode_update")] == [
        "read-only"
    ]
    assert bad_mode.value.code == bad_model.value.code == -32602
    assert "accept-edits" in str(bad_mode.value)
    option = options.config_options[0]
    assert option.current_value == "demo:default"
    update = run.client.updates_of("config_option_update")[0]
    assert update.config_options[0].current_value == "demo:default"
    assert _meta(update)["option_id"] == "model"
    text = "".join(u.content.text for u in run.client.updates_of("agent_message_chunk"))
    assert "scripted" not in text and text  # the demo model answered
    assert answer.stop_reason == "end_turn"


async def test_slash_commands_do_what_they_say(tmp_path: Path) -> None:
    async with running(tmp_path, [{"text": "model reply"}]) as run:
        await run.init()
        sid = await run.new()
        await run.settle(1, "available_commands_update")
        commands = run.client.updates_of("available_commands_update")[0].available_commands
        help_reply = await run.prompt(sid, "/help")
        await run.prompt(sid, "/mode accept-edits")
        await run.prompt(sid, "/model demo:default")
        await run.prompt(sid, "/mode nonsense")
    assert [c.name for c in commands] == ["help", "mode", "model", "compact"]
    assert help_reply.stop_reason == "end_turn"
    chunks = [u.content.text for u in run.client.updates_of("agent_message_chunk")]
    assert "/mode" in chunks[0] and "accept-edits" in chunks[0]
    assert "now `accept-edits`" in chunks[1]
    assert "now `demo:default`" in chunks[2]
    assert "no mode 'nonsense'" in chunks[3]
    assert [u.current_mode_id for u in run.client.updates_of("current_mode_update")] == [
        "accept-edits"
    ]
    assert len(run.client.updates_of("config_option_update")) == 1


async def test_events_channel_is_opt_in_and_lossless(tmp_path: Path) -> None:
    from steerable_bridge.runtime.encoding import codec

    async with running(tmp_path, [TOOL_ROUND, FINAL_ROUND]) as run:
        await run.init(steerable={"events": True})
        sid = await run.new()
        await run.prompt(sid, "go")
        await run.assert_quiet_after_prompt()
    events = [codec.event_from_jsonable(e) for e in run.client.events]
    assert [e.seq for e in events] == list(range(len(events)))
    kinds = [e.kind for e in events]
    assert kinds[0] == "commands_updated"
    assert kinds[1] == "run_started" and kinds[-1] == "run_finished"
    assert {"model_request", "step_started", "text_start", "tool_call_delta"} <= set(kinds)
    assert all(e.session_id == sid for e in events)


async def test_content_blocks_reach_the_model(tmp_path: Path) -> None:
    from steerable_bridge.runtime.encoding import codec

    (tmp_path / "notes.md").write_text("disk text")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret")
    blocks: list[Any] = [
        acp.TextContentBlock(type="text", text="look"),
        acp.ResourceContentBlock(
            type="resource_link", uri=(tmp_path / "notes.md").as_uri(), name="notes.md"
        ),
        acp.ResourceContentBlock(type="resource_link", uri=outside.as_uri(), name="outside"),
        acp.EmbeddedResourceContentBlock(
            type="resource",
            resource=acp.TextResourceContents(uri="file:///x/y.py", text="print(1)"),
        ),
        acp.ImageContentBlock(type="image", data="aGVsbG8=", mime_type="image/png"),
    ]
    try:
        async with running(tmp_path, [{"text": "ok"}], accepts_images=False) as run:
            await run.init(steerable={"events": True})
            sid = await run.new()
            await run.conn.prompt(session_id=sid, prompt=blocks)
    finally:
        outside.unlink()
    request = next(
        codec.event_from_jsonable(e) for e in run.client.events if e["kind"] == "model_request"
    )
    parts = request.request.messages[-1].content  # type: ignore[attr-defined]
    assert parts[0].text == "look"
    assert parts[1].type == "resource" and parts[1].text == "disk text"
    assert parts[2].type == "resource" and parts[2].text is None
    assert "outside the session's working directory" in parts[3].text
    assert parts[4].text == "print(1)"
    assert parts[5].type == "text" and "cannot take images" in parts[5].text


async def test_resource_link_is_read_through_the_client_and_images_pass(tmp_path: Path) -> None:
    from steerable_bridge.runtime.encoding import codec
    from tests.transports.acp.harness import Recorder

    path = str(tmp_path / "open.py")
    client = Recorder(files={path: "unsaved buffer"})
    blocks: list[Any] = [
        acp.ResourceContentBlock(type="resource_link", uri=f"file://{path}", name="open.py"),
        acp.ImageContentBlock(type="image", data="aGVsbG8=", mime_type="image/png"),
    ]
    async with running(tmp_path, [{"text": "ok"}], client=client, accepts_images=True) as run:
        await run.init(steerable={"events": True})
        sid = await run.new()
        await run.conn.prompt(session_id=sid, prompt=blocks)
    request = next(
        codec.event_from_jsonable(e) for e in run.client.events if e["kind"] == "model_request"
    )
    parts = request.request.messages[-1].content  # type: ignore[attr-defined]
    assert client.reads == [path]
    assert parts[0].text == "unsaved buffer"
    assert parts[1].type == "image" and parts[1].data == "aGVsbG8="


async def test_slash_compact_summarizes_between_turns(tmp_path: Path) -> None:
    from steerable_bridge.runtime.encoding import codec

    rounds = [{"text": "first answer " * 40}, {"text": "second answer"}]
    summary = [{"text": "SUMMARY of the first turn"}]
    async with running(tmp_path, rounds, summary_rounds=summary) as run:
        await run.init(steerable={"events": True})
        sid = await run.new()
        await run.prompt(sid, "first question")
        compacted = await run.prompt(sid, "/compact")
        nothing = await run.prompt(sid, "/compact")  # nothing new to fold
        await run.prompt(sid, "second question")
    assert compacted.stop_reason == "end_turn" and nothing.stop_reason == "end_turn"
    events = [codec.event_from_jsonable(e) for e in run.client.events]
    folds = [e for e in events if e.kind == "compaction"]
    assert len(folds) == 1 and folds[0].trigger == "manual" and not folds[0].fallback
    assert folds[0].summary == "SUMMARY of the first turn"
    assert folds[0].post_tokens < folds[0].pre_tokens
    requests = [e.request for e in events if e.kind == "model_request"]
    assert len(requests) == 2  # /compact itself made no model request
    assert requests[-1].messages[0].text.endswith("SUMMARY of the first turn")
    runs = [e for e in events if e.kind == "run_finished"]
    assert len(runs) == 4  # /compact is a turn of its own, even when nothing was folded
    from steerable_bridge.transports.acp.slash import NOTHING_TO_COMPACT

    replies = [
        u
        for u in run.client.updates_of("agent_message_chunk")
        if not u.content.text.startswith(("first", "second"))
    ]
    fold = folds[0]
    assert fold.turns == 1
    assert [u.content.text for u in replies] == [
        f"Compacted 1 turn: {fold.pre_tokens:,} → {fold.post_tokens:,} tokens.\n\n",
        NOTHING_TO_COMPACT,
    ]
    assert replies[0].message_id == f"compaction-{fold.seq}"
    assert _meta(replies[0])["summary"] == fold.summary and replies[1].field_meta is None
