"""`acp --agui-url URL` in front of our own `serve`: the far model's question (an AG-UI
interrupt carrying its form) becomes `elicitation/create` to an editor that answers forms,
and the answer resumes the AG-UI run; an editor without forms gets a yes/no permission."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from acp import schema as acp
from acp import spawn_agent_process

from tests.commands.serve_child import started
from tests.transports.agui.bridge.harness import (
    ACP,
    EditorSide,
    bridge_env,
    prompt_blocks,
    write_script,
)

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.timeout(90)]

SCHEMA = {
    "type": "object",
    "properties": {"size": {"type": "string", "enum": ["small", "large"]}},
    "required": ["size"],
}
ROUNDS = [
    {"tool_calls": [{"id": "q1", "name": "ask_user",
                     "arguments": {"message": "Size?", "schema": SCHEMA}}]},
    {"text": "Got it."},
]  # fmt: skip
FORMS = acp.ClientCapabilities(
    elicitation=acp.ElicitationCapabilities(form=acp.ElicitationFormCapabilities())
)


class FormEditor(EditorSide):
    """An editor that answers forms with `reply`."""

    def __init__(self, reply: Any) -> None:
        super().__init__()
        self.reply = reply
        self.questions: list[tuple[str, Any]] = []

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.questions.append((message, mode))
        return self.reply


async def _prompt(tmp_path: Path, editor: EditorSide, caps: acp.ClientCapabilities) -> Any:
    script = write_script(tmp_path, ROUNDS)
    with started(["--model", f"scripted:{script}"]) as (base, _):
        async with spawn_agent_process(
            cast(Any, editor),
            ACP[0],
            *ACP[1:],
            "--agui-url",
            f"{base}/agent",
            "--storage",
            "memory",
            env=bridge_env(),
            cwd=str(tmp_path),
            transport_kwargs={"stderr": subprocess.DEVNULL},
            use_unstable_protocol=True,
        ) as (conn, _process):
            with anyio.fail_after(60):
                await conn.initialize(protocol_version=1, client_capabilities=caps)
                session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                return await conn.prompt(
                    session_id=session.session_id, prompt=prompt_blocks("make a poster")
                )


def _far_result(editor: EditorSide) -> str:
    done = [
        u for u in editor.updates if isinstance(u, acp.ToolCallProgress) and u.status == "completed"
    ]
    return "".join(getattr(c.content, "text", "") for u in done for c in u.content or ())


@pytest.mark.parametrize(
    ("reply", "seen"),
    [
        (
            acp.AcceptElicitationResponse(action="accept", content={"size": "small"}),
            '"content":{"size":"small"}',
        ),
        (acp.DeclineElicitationResponse(action="decline"), '"action":"decline"'),
    ],
)
async def test_the_far_question_is_asked_as_a_form_and_the_answer_resumes_the_run(
    tmp_path: Path, reply: Any, seen: str
) -> None:
    editor = FormEditor(reply)
    answer = await _prompt(tmp_path, editor, FORMS)
    assert answer.stop_reason == "end_turn"
    ((message, mode),) = editor.questions
    assert message == "Size?"
    assert mode.requested_schema.model_dump(mode="json", exclude_none=True) == SCHEMA
    assert editor.permissions == []
    assert seen in _far_result(editor)  # what the far model read, shown as the call's result
    assert editor.text() == "Got it."


async def test_an_editor_without_forms_gets_a_yes_no_question(tmp_path: Path) -> None:
    editor = FormEditor(acp.CancelElicitationResponse(action="cancel"))
    editor.choice = "reject_once"
    answer = await _prompt(tmp_path, editor, acp.ClientCapabilities())
    assert answer.stop_reason == "end_turn"
    assert editor.questions == [] and len(editor.permissions) == 1
    assert '"action":"decline"' in _far_result(editor)
