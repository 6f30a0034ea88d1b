"""Project notes: found from the repository root down to the cwd, bounded, in the prompt."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.tools.notes import ProjectNotes, read_project_notes
from steerable_bridge.runtime import events as ev
from tests.runtime.harness import make_agent, of, prompt, scripted


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Run tests with uv.\n", encoding="utf-8")
    sub = root / "pkg"
    (sub / ".steerable").mkdir(parents=True)
    (sub / "CLAUDE.md").write_text("Keep modules small.\n", encoding="utf-8")
    (sub / ".steerable" / "notes.md").write_text("Never touch vendor/.\n", encoding="utf-8")
    (tmp_path / "AGENTS.md").write_text("outside the repository\n", encoding="utf-8")
    return sub


def test_notes_run_from_the_repository_root_to_the_cwd(tmp_path: Path) -> None:
    notes = read_project_notes(str(_project(tmp_path)))
    assert notes.startswith("<project-notes>") and notes.endswith("</project-notes>")
    order = [notes.index(t) for t in ("uv.", "small.", "vendor/")]
    assert order == sorted(order)
    assert "outside the repository" not in notes


def test_notes_are_bounded_and_say_what_was_cut(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * 50_000, encoding="utf-8")
    notes = read_project_notes(str(tmp_path), max_chars=1000)
    assert len(notes) < 1500 and "cut: AGENTS.md has 50000 characters" in notes
    assert read_project_notes(str(tmp_path / "nothing-here")) == ""


@pytest.mark.anyio
async def test_the_notes_reach_the_logged_request(tmp_path: Path) -> None:
    cwd = _project(tmp_path)
    agent = make_agent(scripted({"text": "ok"}, loop=True))

    async def notes(path: str) -> str:
        return read_project_notes(path)

    agent.notes = notes
    session = await agent.new_session(str(cwd))
    _, seen = await prompt(session, "hi")
    (request,) = of(seen, ev.ModelRequestEvent)
    assert "<project-notes>" in request.request.system
    assert "Never touch vendor/." in request.request.system


@pytest.mark.anyio
async def test_sessions_made_together_share_one_read(tmp_path: Path) -> None:
    cwd = str(_project(tmp_path))
    now = [0.0]
    reader = ProjectNotes(fresh_s=2.0, clock=lambda: now[0])
    texts: list[str] = []

    async def one() -> None:
        texts.append(await reader.read(cwd))

    async with anyio.create_task_group() as tg:  # a burst of new sessions in one folder
        for _ in range(20):
            tg.start_soon(one)
    assert reader.reads == 1 and len(set(texts)) == 1 and "vendor/" in texts[0]
    (Path(cwd) / "CLAUDE.md").write_text("Edited.\n", encoding="utf-8")
    now[0] = 1.0
    assert "Edited." not in await reader.read(cwd)  # still fresh: reused
    now[0] = 2.5
    assert "Edited." in await reader.read(cwd)  # stale: read again
    assert reader.reads == 2
    assert await reader.read(str(tmp_path / "elsewhere")) == ""
    assert reader.reads == 3
