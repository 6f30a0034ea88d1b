"""The ACP renderer in isolation: each LoopEvent kind → the SDK update models it must become."""

from __future__ import annotations

from typing import Any

import pytest
from acp import schema as acp

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import KINDS
from steerable_bridge.runtime.ports.permissions import MODES
from steerable_bridge.runtime.values import (
    Command,
    DiffContent,
    ImagePart,
    Location,
    PlanEntry,
    ResourcePart,
    TerminalContent,
    TextPart,
    ToolError,
)
from steerable_bridge.transports.acp.renderer import (
    AcpRenderer,
    mode_state,
    model_options,
    stop_reason,
)

_seq = iter(range(1000))


def make(cls: type[Any], **fields: Any) -> Any:
    return cls(session_id="s1", run_id="r1", seq=next(_seq), ts=1_700_000_000_000, **fields)


def meta(update: Any) -> dict[str, Any]:
    data: dict[str, Any] = update.field_meta["steerable"]
    return data


def test_text_and_reasoning_become_chunks_with_their_message_ids() -> None:
    r = AcpRenderer()
    assert r.render(make(ev.TextStart, message_id="m1")) == []
    [text] = r.render(make(ev.TextDelta, message_id="m1", delta="Hi"))
    [thought] = r.render(make(ev.ReasoningDelta, message_id="t1", delta="hmm"))
    assert isinstance(text, acp.AgentMessageChunk) and text.content.text == "Hi"
    assert text.message_id == "m1"
    assert isinstance(thought, acp.AgentThoughtChunk) and thought.content.text == "hmm"
    assert meta(text)["kind"] == "text_delta" and meta(text)["run_id"] == "r1"


def test_user_messages_render_only_on_replay_but_steering_always() -> None:
    content = (TextPart(text="hello"), ResourcePart(uri="file:///a.py", text="x=1"))
    user = make(ev.UserMessage, message_id="u1", content=content)
    steer = make(ev.SteerApplied, message_id="s1", content=(TextPart(text="also"),))
    assert AcpRenderer().render(user) == []
    chunks = AcpRenderer(echo_user=True).render(user)
    assert [type(c) for c in chunks] == [acp.UserMessageChunk, acp.UserMessageChunk]
    assert chunks[1].content.resource.text == "x=1"
    assert [(meta(c)["part"], meta(c)["parts"]) for c in chunks] == [(0, 2), (1, 2)]
    [steered] = AcpRenderer().render(steer)
    assert steered.content.text == "also" and meta(steered)["kind"] == "steer_applied"


def test_a_tool_call_is_pending_then_in_progress_then_finished() -> None:
    r = AcpRenderer()
    [call] = r.render(
        make(
            ev.ToolCallEnd,
            call_id="c1",
            name="write_file",
            arguments_json='{"path":"src/app.py"}',
            tool_kind="edit",
            title="Write src/app.py",
            locations=(Location(path="src/app.py", line=3),),
        )
    )
    assert isinstance(call, acp.ToolCallStart)
    assert (call.status, call.kind, call.title) == ("pending", "edit", "Write src/app.py")
    assert call.raw_input == {"path": "src/app.py"}
    assert [(loc.path, loc.line) for loc in call.locations or []] == [("src/app.py", 3)]
    assert meta(call)["arguments_json"] == '{"path":"src/app.py"}'
    [started] = r.render(make(ev.ToolStarted, call_id="c1"))
    assert isinstance(started, acp.ToolCallProgress) and started.status == "in_progress"
    [first] = r.render(make(ev.ToolOutput, call_id="c1", content=(TextPart(text="a"),)))
    [second] = r.render(make(ev.ToolOutput, call_id="c1", content=(TextPart(text="b"),)))
    assert [c.content.text for c in second.content] == ["a", "b"]  # content replaces: cumulative
    assert meta(second)["parts"] == 1 and first.status is None
    [done] = r.render(
        make(
            ev.ToolFinished,
            call_id="c1",
            status="completed",
            content=(
                DiffContent(path="/w/src/app.py", old_text="x", new_text="y"),
                TerminalContent(terminal_id="term-1"),
                ImagePart(data="aGk=", mime_type="image/png"),
                ResourcePart(uri="https://e.x/doc", name="doc"),
            ),
            raw_output_json='{"ok":true}',
        )
    )
    assert done.status == "completed" and done.raw_output == {"ok": True}
    diff, terminal, image, link = done.content
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == (
        "diff",
        "/w/src/app.py",
        "x",
        "y",
    )
    assert (terminal.type, terminal.terminal_id) == ("terminal", "term-1")
    assert image.content.type == "image" and link.content.type == "resource_link"
    assert meta(done)["raw_output_json"] == '{"ok":true}'


def test_a_cancelled_call_is_failed_and_marked_cancelled() -> None:
    error = ToolError(code="cancelled", message="cancelled before it finished")
    [update] = AcpRenderer().render(
        make(ev.ToolFinished, call_id="c9", status="cancelled", error=error)
    )
    assert update.status == "failed"
    assert update.content[0].content.text == "cancelled before it finished"
    assert meta(update)["status"] == "cancelled" and meta(update)["parts"] == 0
    assert meta(update)["error"] == {"code": "cancelled", "message": error.message}


def test_raw_input_that_is_not_json_is_kept_as_text() -> None:
    [call] = AcpRenderer().render(
        make(ev.ToolCallEnd, call_id="c2", name="calc", arguments_json="{oops")
    )
    assert call.raw_input == "{oops" and call.title == "calc"


def test_session_level_events() -> None:
    r = AcpRenderer(routes=("demo:default", "openai:gpt"))
    [plan] = r.render(make(ev.PlanUpdated, entries=(PlanEntry(content="a", status="completed"),)))
    assert isinstance(plan, acp.AgentPlanUpdate)
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("a", "completed", "medium")
    ]
    assert r.render(make(ev.UsageUpdated, used=50, size=None)) == []  # window unknown
    [usage] = r.render(make(ev.UsageUpdated, used=50, size=4096))
    assert (usage.used, usage.size, meta(usage)["size"]) == (50, 4096, 4096)
    [info] = r.render(make(ev.SessionInfo, title="Fix the bug"))
    assert info.title == "Fix the bug" and info.updated_at == "2023-11-14T22:13:20Z"
    [mode] = r.render(make(ev.ModeChanged, mode_id="read-only"))
    assert mode.current_mode_id == "read-only"
    [config] = r.render(make(ev.ConfigChanged, option_id="model", value="openai:gpt"))
    assert config.config_options[0].current_value == "openai:gpt"
    assert [o.value for o in config.config_options[0].options] == ["demo:default", "openai:gpt"]
    assert r.render(make(ev.ConfigChanged, option_id="other", value="x")) == []
    [commands] = r.render(
        make(
            ev.CommandsUpdated,
            commands=(
                Command(name="help", description="h"),
                Command(name="mode", description="m", input_hint="id"),
            ),
        )
    )
    assert [
        (c.name, c.input.root.hint if c.input else None) for c in commands.available_commands
    ] == [
        ("help", None),
        ("mode", "id"),
    ]


def test_kinds_without_an_editor_rendering_produce_nothing() -> None:
    shown = {
        "text_delta", "reasoning_delta", "user_message", "steer_applied", "follow_up_applied",
        "tool_call_end", "tool_started", "tool_output", "tool_finished", "plan_updated",
        "usage_updated", "session_info", "mode_changed", "config_changed", "commands_updated",
    }  # fmt: skip
    r = AcpRenderer()
    silent = [
        make(ev.RunStarted, model="demo:default"),
        make(ev.RunFinished, stop_reason="end_turn"),
        make(ev.RunFailed, code="x", message="y"),
        make(ev.StepStarted, step=1),
        make(ev.ToolCallStart, call_id="c", name="n", parent_message_id="m"),
        make(ev.ToolCallDelta, call_id="c", delta="{"),
        make(ev.StateSnapshot, state_json="{}"),
        make(ev.HookAction, hook="h", action="a"),
    ]
    assert all(r.render(e) == [] for e in silent)
    assert {e.kind for e in silent}.isdisjoint(shown) and shown <= set(KINDS)


@pytest.mark.parametrize(
    ("runtime", "wire"),
    [
        ("end_turn", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("max_steps", "max_turn_requests"),
        ("refusal", "refusal"),
        ("cancelled", "cancelled"),
        ("interrupted", "end_turn"),
    ],
)
def test_stop_reasons(runtime: Any, wire: str) -> None:
    assert stop_reason(runtime) == wire


def test_mode_state_and_model_options_include_the_current_value() -> None:
    modes = tuple((mode, name, text) for mode, (name, text) in MODES.items())
    state = mode_state("accept-edits", modes)
    assert state.current_mode_id == "accept-edits"
    assert [m.id for m in state.available_modes] == ["default", "accept-edits", "read-only"]
    [option] = model_options(["demo:default"], "scripted:x.json")
    assert [o.value for o in option.options] == ["scripted:x.json", "demo:default"]
    assert option.category == "model" and option.id == "model"


def _wire(update: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = update.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def test_a_notice_is_a_v125_notice_only_for_a_client_that_advertised_notices() -> None:
    notice = make(ev.Notice, severity="warning", title="Paused", description="Run /compact.")
    [update] = AcpRenderer(notices=True).render(notice)
    wire = _wire(update)
    assert {k: wire[k] for k in ("sessionUpdate", "severity", "title", "description")} == {
        "sessionUpdate": "notice",
        "severity": "warning",
        "title": "Paused",
        "description": "Run /compact.",
    }
    assert wire["_meta"]["steerable"]["seq"] == notice.seq
    [fallback] = AcpRenderer().render(notice)
    assert fallback.session_update == "agent_message_chunk"
    assert fallback.content.text == "Paused\n\nRun /compact.\n\n"
    assert fallback.message_id == f"notice-{notice.seq}"


def test_a_replay_never_resends_a_notice() -> None:
    notice = make(ev.Notice, severity="info", title="Guessed the window")
    for notices in (True, False):
        assert AcpRenderer(echo_user=True, notices=notices).render(notice) == []


@pytest.mark.parametrize("trigger", ["manual", "pressure", "overflow", "micro"])
def test_every_compaction_trigger_is_a_v125_compaction_lifecycle(trigger: str) -> None:
    scope = "tool_results" if trigger == "micro" else "history"
    summary = "" if trigger == "micro" else "We fixed the parser."
    fold = make(
        ev.Compaction,
        summary=summary,
        through_seq=3,
        trigger=trigger,
        scope=scope,
        pre_tokens=900,
        post_tokens=300,
    )
    updates = [_wire(u) for u in AcpRenderer(compaction=True).render(fold)]
    cid = f"compaction-{fold.seq}"
    assert [(u["sessionUpdate"], u["compactionId"]) for u in updates] == [
        ("compaction_update", cid),
        ("compaction_summary_chunk", cid),
        ("compaction_update", cid),
    ]
    assert [u.get("status") for u in updates] == ["in_progress", None, "completed"]
    assert updates[1]["content"] == {"type": "text", "text": summary or fold.headline}
    assert updates[2]["_meta"]["steerable"]["trigger"] == trigger
    [headline] = AcpRenderer().render(fold)  # a client without session.compaction
    assert headline.session_update == "agent_message_chunk"


def test_session_features_read_the_raw_initialize() -> None:
    from steerable_bridge.transports.acp.capabilities import session_features

    both = {"clientCapabilities": {"session": {"notices": {}, "compaction": {}}}}
    assert session_features(both) == (True, True)
    assert session_features({"clientCapabilities": {"session": {"notices": None}}}) == (
        False,
        False,
    )
    assert session_features({"clientCapabilities": {}}) == (False, False)
    assert session_features(None) == (False, False)
