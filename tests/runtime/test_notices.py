"""Notices a turn logs for the user: the agent's advisories (first turn of a session in this
process) and a guessed context window (once per session); the model never sees them."""

from __future__ import annotations

import dataclasses

import pytest

from steerable_bridge.adapters.llm.scripted import Script, ScriptedProvider
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.model import ModelInfo
from steerable_bridge.runtime.values import Advisory
from tests.runtime.harness import make_agent, of, prompt, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class GuessingProvider(ScriptedProvider):
    """A scripted model whose window is only the name table's guess."""

    @property
    def info(self) -> ModelInfo:
        return dataclasses.replace(super().info, context_window=128_000, window_guessed=True)


def _requests_text(events: list[ev.LoopEvent]) -> str:
    return " ".join(m.text for e in of(events, ev.ModelRequestEvent) for m in e.request.messages)


async def test_a_guessed_window_is_told_once_per_session() -> None:
    provider = GuessingProvider(Script.model_validate({"rounds": [{"text": "ok"}], "loop": True}))
    agent = make_agent(provider)
    session = await agent.new_session("/work")
    await prompt(session, "one")
    await prompt(session, "two")
    events = list(session.log.view())
    (notice,) = of(events, ev.Notice)
    assert notice.severity == "info" and notice.title == "Context window guessed: 128,000 tokens"
    assert "STEERABLE_CONTEXT_WINDOW" in (notice.description or "")
    assert "guessed" not in _requests_text(events)  # the user is told, not the model
    other = await agent.new_session("/work")
    await prompt(other, "three")
    assert len(of(list(other.log.view()), ev.Notice)) == 1


async def test_a_known_window_is_not_a_notice() -> None:
    session = await make_agent(scripted({"text": "ok"}, loop=True)).new_session("/work")
    await prompt(session, "one")
    assert of(list(session.log.view()), ev.Notice) == []


async def test_advisories_are_logged_in_the_first_turn_only() -> None:
    agent = make_agent(scripted({"text": "ok"}, loop=True))
    advisory = Advisory(severity="warning", title="Commands run without a sandbox")
    agent.config = dataclasses.replace(agent.config, advisories=(advisory,))
    session = await agent.new_session("/work")
    _, first = await prompt(session, "one")
    _, second = await prompt(session, "two")
    assert [e.kind for e in first[:2]] == ["run_started", "notice"]
    (notice,) = of(first, ev.Notice)
    assert (notice.severity, notice.title, notice.description) == (
        "warning",
        "Commands run without a sandbox",
        None,
    )
    assert of(second, ev.Notice) == []
    assert "sandbox" not in _requests_text(list(session.log.view()))
