"""What a bridged agent's `session/update`s become: the LoopEvents an AG-UI client is shown."""

from __future__ import annotations

from itertools import count
from typing import Any

from acp import schema as acp

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.values import DiffContent, Location, TerminalContent, TextPart
from steerable_bridge.transports.acp.bridge.mapping import (
    Emission,
    UpdateMapper,
    run_stop_reason,
    run_usage,
    session_level,
)


def mapper() -> UpdateMapper:
    numbers = count(1)
    return UpdateMapper(new_id=lambda prefix: f"{prefix}{next(numbers)}")


def kinds(out: list[Emission]) -> list[str]:
    return [str(cls.__dataclass_fields__["kind"].default) for cls, _ in out]


def text(message_id: str | None, chunk: str) -> acp.AgentMessageChunk:
    return acp.AgentMessageChunk(
        session_update="agent_message_chunk",
        content=acp.TextContentBlock(type="text", text=chunk),
        message_id=message_id,
    )


def thought(chunk: str) -> acp.AgentThoughtChunk:
    return acp.AgentThoughtChunk(
        session_update="agent_thought_chunk", content=acp.TextContentBlock(type="text", text=chunk)
    )


def call(**fields: Any) -> acp.ToolCallStart:
    return acp.ToolCallStart(session_update="tool_call", tool_call_id="t1", **fields)


def progress(**fields: Any) -> acp.ToolCallProgress:
    return acp.ToolCallProgress(session_update="tool_call_update", tool_call_id="t1", **fields)


def test_text_chunks_open_one_message_and_a_new_message_id_starts_another() -> None:
    m = mapper()
    out = m.update(text(None, "Hel")) + m.update(text(None, "lo")) + m.update(text("m2", "Bye"))
    assert kinds(out) == [
        "text_start", "text_delta", "text_delta", "text_end", "text_start", "text_delta",
    ]  # fmt: skip
    assert out[0][1]["message_id"] == "msg1" and out[4][1]["message_id"] == "m2"
    assert kinds(m.close("end")) == ["text_end"]


def test_a_thought_is_reasoning_and_ends_before_the_answer_starts() -> None:
    m = mapper()
    out = m.update(thought("hmm")) + m.update(text(None, "Answer"))
    assert kinds(out) == [
        "reasoning_start", "reasoning_delta", "reasoning_end", "text_start", "text_delta",
    ]  # fmt: skip
    assert out[1][1]["delta"] == "hmm"


def test_a_tool_call_ends_when_it_runs_with_the_input_a_later_update_gave() -> None:
    m = mapper()
    first = m.update(text(None, "Editing.")) + m.update(call(title="Edit a.py", status="pending"))
    assert kinds(first) == ["text_start", "text_delta", "text_end", "tool_call_start"]
    assert first[3][1]["parent_message_id"] == "msg1"
    running = m.update(
        progress(
            status="in_progress",
            kind="edit",
            raw_input={"path": "a.py"},
            locations=[acp.ToolCallLocation(path="/w/a.py", line=3)],
        )
    )
    assert kinds(running) == ["tool_call_delta", "tool_call_end", "tool_started"]
    end = running[1][1]
    assert (
        end["arguments_json"] == '{"path":"a.py"}'
        and running[0][1]["delta"] == end["arguments_json"]
    )
    assert end["tool_kind"] == "edit" and end["title"] == "Edit a.py"
    assert end["locations"] == (Location(path="/w/a.py", line=3),)
    done = m.update(
        progress(
            status="completed",
            content=[
                acp.FileEditToolCallContent(
                    type="diff", path="/w/a.py", old_text="x", new_text="y"
                ),
                acp.TerminalToolCallContent(type="terminal", terminal_id="term-1"),
            ],
            raw_output={"ok": True},
        )
    )
    assert kinds(done) == ["tool_finished"]
    finished = done[0][1]
    assert finished["status"] == "completed"
    assert finished["content"] == (
        DiffContent(path="/w/a.py", old_text="x", new_text="y"),
        TerminalContent(terminal_id="term-1"),
    )
    assert finished["raw_output_json"] == '{"ok":true}'
    assert m.close("end") == []  # nothing left open


def test_output_while_running_shows_only_the_new_parts_and_a_failure_names_why() -> None:
    m = mapper()
    m.update(call(title="Run tests", kind="execute", status="in_progress"))
    block = acp.ContentToolCallContent(
        type="content", content=acp.TextContentBlock(type="text", text="1 passed")
    )
    more = acp.ContentToolCallContent(
        type="content", content=acp.TextContentBlock(type="text", text="1 failed")
    )
    first = m.update(progress(content=[block]))
    second = m.update(progress(content=[block, more]))
    assert kinds(first) == ["tool_output"] and kinds(second) == ["tool_output"]
    assert second[0][1]["content"] == (TextPart(text="1 failed"),)
    failed = m.update(progress(status="failed"))
    error = failed[0][1]["error"]
    assert failed[0][1]["status"] == "failed" and error.code == "tool_failed"
    assert "1 failed" in error.message


def test_a_call_the_agent_never_finished_gets_a_cancelled_result() -> None:
    m = mapper()
    m.update(call(title="Read", status="pending"))
    out = m.close("cancelled")
    assert kinds(out) == ["tool_call_delta", "tool_call_end", "tool_finished"]
    assert out[-1][1]["status"] == "cancelled"


def test_a_permission_request_for_an_unseen_call_makes_it_a_complete_open_call() -> None:
    m = mapper()
    update = acp.ToolCallUpdate(
        tool_call_id="p1", title="Write b.txt", kind="edit", raw_input={"path": "b.txt"},
        field_meta={"steerable": {"name": "write_file"}},
    )  # fmt: skip
    out, name, title = m.permission(update)
    assert kinds(out) == ["tool_call_start", "tool_call_delta", "tool_call_end"]
    assert name == "write_file" and title == "Write b.txt"
    assert out[-1][1]["tool_kind"] == "edit"


def test_session_updates_become_session_events_and_unknown_ones_are_ignored() -> None:
    m = mapper()
    plan = acp.AgentPlanUpdate(
        session_update="plan",
        entries=[acp.PlanEntry(content="step", priority="high", status="in_progress")],
    )
    usage = acp.UsageUpdate(session_update="usage_update", used=100, size=2000)
    title = acp.SessionInfoUpdate(session_update="session_info_update", title="Fix it")
    commands = acp.AvailableCommandsUpdate(
        session_update="available_commands_update",
        available_commands=[acp.AvailableCommand(name="plan", description="make a plan")],
    )
    mode = acp.CurrentModeUpdate(session_update="current_mode_update", current_mode_id="ask")
    out = [e for u in (plan, usage, title, commands, mode) for e in m.update(u)]
    assert [cls for cls, _ in out] == [
        ev.PlanUpdated, ev.UsageUpdated, ev.SessionInfo, ev.CommandsUpdated, ev.ModeChanged,
    ]  # fmt: skip
    assert out[1][1] == {"used": 100, "size": 2000}
    assert out[3][1]["commands"][0].name == "plan"
    echo = acp.UserMessageChunk(
        session_update="user_message_chunk", content=acp.TextContentBlock(type="text", text="x")
    )
    assert m.update(echo) == [] and m.update(object()) == []
    assert session_level(echo) is None


def test_config_options_are_kept_under_their_own_prefix() -> None:
    option = acp.SessionConfigOptionSelect(
        id="model",
        name="Model",
        type="select",
        current_value="gpt-x",
        options=[acp.SessionConfigSelectOption(value="gpt-x", name="GPT X")],
    )
    update = acp.ConfigOptionUpdate(session_update="config_option_update", config_options=[option])
    out = session_level(update)
    assert out == [(ev.ConfigChanged, {"option_id": "acp.option.model", "value": "gpt-x"})]


def test_stop_reasons_and_usage_of_the_prompt_response() -> None:
    assert run_stop_reason("max_turn_requests") == "max_steps"
    assert run_stop_reason("refusal") == "refusal"
    usage = run_usage(
        acp.Usage(total_tokens=15, input_tokens=10, output_tokens=5, cached_read_tokens=4)
    )
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (10, 5, 4)
    assert run_usage(None).total_tokens == 0


def test_a_call_with_its_input_ends_at_once_and_our_own_agent_says_cancelled() -> None:
    m = mapper()
    out = m.update(call(title="Wait", status="pending", raw_input={}))
    assert kinds(out) == ["tool_call_start", "tool_call_delta", "tool_call_end"]
    failed = m.update(
        progress(
            status="failed",
            content=[
                acp.ContentToolCallContent(
                    type="content", content=acp.TextContentBlock(type="text", text="stopped")
                )
            ],
            field_meta={
                "steerable": {
                    "status": "cancelled",
                    "parts": 0,
                    "error": {"code": "cancelled", "message": "stopped"},
                }
            },
        )
    )
    finished = failed[-1][1]
    assert finished["status"] == "cancelled" and finished["content"] == ()
    assert finished["error"].code == "cancelled"


def test_a_pause_for_a_permission_closes_open_messages_and_later_text_starts_a_new_one() -> None:
    # fast-agent streams an empty text chunk after its tool call, then asks permission:
    # the run that ends on that interrupt must not end inside a message.
    m = mapper()
    m.update(call(title="lookup"))
    opened = m.update(text(None, ""))
    assert kinds(opened) == ["text_start"]
    assert kinds(m.pause()) == ["text_end"] and m.pause() == []
    resumed = m.update(text(None, "after"))
    assert kinds(resumed) == ["text_start", "text_delta"]
    assert resumed[0][1]["message_id"] != opened[0][1]["message_id"]
