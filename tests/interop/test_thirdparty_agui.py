"""Real third-party AG-UI servers on a fake model: pydantic-ai (`AGUIAdapter`) and ag-ui-langgraph.

Each server is a tiny script in `servers/` run from its cached venv (installed on first use,
`venvs.py`) on an OS-picked port, its model the fake Chat Completions server
(`fake_models.py`). Two clients grade it: our `steerable-bridge check agui` (a text run, a
backend tool run — through the command line itself — and a frontend tool run) must report no
failure — a failure on these servers would be a false one, a bug of ours — and the official
`@ag-ui/client` HttpAgent (`thirdparty_agui.mjs`), which verifies every stream as it reads
it, must complete a two-prompt chat (the second model request carries the first exchange), a
backend tool call whose result reaches the model, and a frontend tool the client answers in
the next run. Without node, uv or the packages, the tests skip with a warning.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from steerable_bridge.conformance.validators.check_agui import (
    check_agui_endpoint,
    default_run_input,
)
from tests.interop.fake_models import FakeModel, FakeModelServer, serve_fake_models
from tests.interop.thirdparty import (
    Unavailable,
    langgraph_server,
    pydantic_ai_server,
    skip_unavailable,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SERVERS = ["pydantic_ai_agui", "langgraph_agui"]
CARD = ("show_card", {"title": "from the fake"})
CARD_TOOL = {
    "name": "show_card",
    "description": "Show a card in the page.",
    "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
}


@pytest.fixture(scope="module", params=SERVERS)
def running(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, FakeModelServer]]:
    """One server (and its fake) per module: each takes ~10 s to import and start."""
    start = {"pydantic_ai_agui": pydantic_ai_server, "langgraph_agui": langgraph_server}
    with serve_fake_models(FakeModel()) as fake:
        try:
            server = start[request.param](fake, tmp_path_factory.mktemp(request.param))
            url = server.__enter__()
        except Unavailable as err:
            skip_unavailable(str(err))
        try:
            yield url, fake
        finally:
            server.__exit__(None, None, None)


@pytest.fixture
def server(running: tuple[str, FakeModelServer]) -> str:
    return running[0]


@pytest.fixture
def fake_models(running: tuple[str, FakeModelServer]) -> FakeModelServer:
    """The running server's fake, its record cleared for this test."""
    running[1].model.reset()
    return running[1]


def _types(sse: bytes) -> list[str]:
    found = []
    for line in sse.decode().splitlines():
        if line.startswith("data:"):
            found.append(json.loads(line[5:])["type"])
    return [t for t in found if t != "RAW"]


def test_check_agui_passes_a_real_server_on_text_and_tool_runs(
    server: str, fake_models: FakeModelServer, tmp_path: Path
) -> None:
    fake = fake_models.model
    text = anyio.run(lambda: check_agui_endpoint(server, record=tmp_path / "text.sse", within=90))
    assert text.ok, text.to_text()
    assert "TEXT_MESSAGE_CONTENT" in _types((tmp_path / "text.sse").read_bytes())

    tool_input = default_run_input()
    tool_input["messages"][0]["content"] = f"Please {fake.trigger} now."
    (tmp_path / "tool.json").write_text(json.dumps(tool_input))
    cli = subprocess.run(
        [sys.executable, "-m", "steerable_bridge.cli", "check", "agui", server,
         "--input", str(tmp_path / "tool.json"), "--record", str(tmp_path / "tool.sse"),
         "--timeout", "90", "--format", "json"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stdout + cli.stderr
    report = json.loads(cli.stdout)
    assert report["summary"]["fail"] == 0, cli.stdout
    assert {c["id"] for c in report["checks"]} >= {"agui.rules", "agui.stream.complete"}
    types = _types((tmp_path / "tool.sse").read_bytes())
    assert {"TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT"} <= set(types), types
    assert fake.saw_tool_result(), "the server never sent the tool result back to the model"

    fake.reset((CARD, *fake.tool_preferences))
    front_input = {**tool_input, "tools": [CARD_TOOL]}
    front = anyio.run(
        lambda: check_agui_endpoint(
            server, run_input=front_input, record=tmp_path / "front.sse", within=90
        )
    )
    assert front.ok, front.to_text()
    types = _types((tmp_path / "front.sse").read_bytes())
    assert "TOOL_CALL_START" in types and "TOOL_CALL_RESULT" not in types, types
    assert fake.tool_calls()[-1].reply.tool == "show_card"


def _ag_ui_client(node: str, url: str, trigger: str) -> dict[str, Any]:
    done = subprocess.run(
        [node, str(HERE / "thirdparty_agui.mjs"), url, trigger],
        cwd=HERE, capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert done.returncode == 0, f"the @ag-ui/client driver failed:\n{done.stderr}\n{done.stdout}"
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_the_official_ag_ui_client_runs_chat_and_tools_on_a_real_server(
    server: str, node: str, fake_models: FakeModelServer
) -> None:
    fake = fake_models.model
    fake.reset((CARD, *fake.tool_preferences))  # show_card is offered only in frontend_tool
    report = _ag_ui_client(node, server, fake.trigger)
    assert report["warnings"] == []
    runs = {s["name"]: s["runs"] for s in report["scenarios"]}
    for name, scenario in runs.items():
        for run in scenario:
            assert run["error"] is None, (name, run)
            assert run["types"][0] == "RUN_STARTED" and run["types"][-1] == "RUN_FINISHED", run

    first, second = runs["chat"]
    assert first["text"] == second["text"] == fake.text
    chats = [r for r in fake.requests if "And once more." in r.last_user_text]
    assert chats, "the second prompt never reached the model"
    history = json.dumps(chats[0].body.get("messages"))
    assert "Say hello." in history and fake.text in history, history

    (backend,) = runs["backend_tool"]
    assert [c["name"] for c in backend["toolCalls"]] == ["lookup"], backend
    assert backend["results"] and "lookup result for fake" in backend["results"][0]["content"]
    assert fake.after_tool in backend["text"], backend

    asked, answered = runs["frontend_tool"]
    assert [c["name"] for c in asked["toolCalls"]] == ["show_card"], asked
    assert asked["results"] == []  # the client runs it, not the server
    assert fake.after_tool in answered["text"], answered
    assert any("card shown" in r for req in fake.requests for r in req.tool_results)
