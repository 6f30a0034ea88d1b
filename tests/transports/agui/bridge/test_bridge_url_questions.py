"""`acp --agui-url URL` in front of our own `serve`: the far model's url question (an AG-UI
interrupt with `metadata: {mode: url, url}`) becomes a url-mode `elicitation/create` to an
editor that advertised url elicitation, the accept resumes the run, and the editor gets
`elicitation/complete` for that id once; an editor with forms only gets a yes/no form."""

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

PAGE = "https://example.com/consent?state=far"
ROUNDS = [
    {"tool_calls": [{"id": "q1", "name": "ask_user",
                     "arguments": {"message": "Approve, then come back.", "url": PAGE}}]},
    {"text": "Got it."},
]  # fmt: skip
URLS = acp.ClientCapabilities(
    elicitation=acp.ElicitationCapabilities(
        form=acp.ElicitationFormCapabilities(), url=acp.ElicitationUrlCapabilities()
    )
)
FORMS = acp.ClientCapabilities(
    elicitation=acp.ElicitationCapabilities(form=acp.ElicitationFormCapabilities())
)


class UrlEditor(EditorSide):
    """An editor that answers questions with `reply` and records completions."""

    def __init__(self, reply: Any) -> None:
        super().__init__()
        self.reply = reply
        self.questions: list[tuple[str, Any]] = []
        self.completed: list[str] = []

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.questions.append((message, mode))
        return self.reply

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        self.completed.append(elicitation_id)


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
                    session_id=session.session_id, prompt=prompt_blocks("sync my calendar")
                )


def _far_result(editor: EditorSide) -> str:
    done = [
        u for u in editor.updates if isinstance(u, acp.ToolCallProgress) and u.status == "completed"
    ]
    return "".join(getattr(c.content, "text", "") for u in done for c in u.content or ())


async def test_the_far_url_question_is_asked_in_url_mode_and_completed_once(
    tmp_path: Path,
) -> None:
    editor = UrlEditor(acp.AcceptElicitationResponse(action="accept"))
    answer = await _prompt(tmp_path, editor, URLS)
    assert answer.stop_reason == "end_turn"
    ((message, mode),) = editor.questions
    assert message == "Approve, then come back."
    assert isinstance(mode, acp.ElicitationUrlSessionMode) and str(mode.url) == PAGE
    assert editor.completed == [mode.elicitation_id]
    assert PAGE in _far_result(editor)  # the far model read that the person opened it
    assert editor.text() == "Got it."


async def test_an_editor_with_forms_only_gets_a_yes_no_form_with_the_page(
    tmp_path: Path,
) -> None:
    editor = UrlEditor(acp.AcceptElicitationResponse(action="accept", content={"done": True}))
    answer = await _prompt(tmp_path, editor, FORMS)
    assert answer.stop_reason == "end_turn"
    ((message, mode),) = editor.questions
    assert isinstance(mode, acp.ElicitationFormSessionMode) and PAGE in message
    assert editor.completed == []
    assert '"action":"accept"' in _far_result(editor)
