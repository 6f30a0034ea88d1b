"""Watching a turn from outside the loop: observers see every event in order, the log
context names the session, run and trace, and a crash inside the turn keeps its traceback."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.ports.model import ModelInfo, ModelRequest, ModelStreamItem
from steerable_bridge.runtime.ports.observe import RunWatch
from steerable_bridge.runtime.turns import logcontext
from tests.runtime.harness import kinds, make_agent, prompt, scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


@dataclass
class Watch:
    trace_id: str | None
    seen: list[ev.LoopEvent] = field(default_factory=list)
    contexts: list[logcontext.LogContext | None] = field(default_factory=list)
    closed: bool = False

    def event(self, event: ev.LoopEvent) -> None:
        self.seen.append(event)
        current = logcontext.current()
        self.contexts.append(None if current is None else logcontext.LogContext(**vars_of(current)))

    def close(self) -> None:
        self.closed = True


def vars_of(context: logcontext.LogContext) -> dict[str, str | None]:
    return {
        "session_id": context.session_id,
        "run_id": context.run_id,
        "trace_id": context.trace_id,
    }


@dataclass
class Recorder:
    trace_id: str | None = "0af7651916cd43dd8448eb211c80319c"
    watches: list[Watch] = field(default_factory=list)
    parents: list[str | None] = field(default_factory=list)

    def start(self, session_id: str, *, traceparent: str | None = None) -> RunWatch:
        self.parents.append(traceparent)
        watch = Watch(self.trace_id)
        self.watches.append(watch)
        return watch


class Exploding:
    """A provider with a bug: it raises something no adapter should."""

    info = ModelInfo(route="test:boom")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        raise KeyError("a bug in the adapter")
        yield  # pragma: no cover


async def test_an_observer_sees_every_event_with_the_turn_in_the_log_context() -> None:
    recorder = Recorder()
    agent = make_agent(scripted({"text": "hello"}))
    agent.observers = (recorder,)
    session = await agent.new_session("/tmp")
    _, sent = await prompt(session)
    (watch,) = recorder.watches
    assert watch.closed
    assert kinds(watch.seen) == kinds(sent)
    run_id = sent[0].run_id
    assert watch.contexts[-1] == logcontext.LogContext(
        session_id=session.id, run_id=run_id, trace_id=recorder.trace_id
    )
    assert logcontext.current() is None  # unbound once the turn is over


async def test_a_bug_in_the_turn_is_logged_with_traceback_and_ids(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = make_agent(Exploding())  # type: ignore[arg-type]
    agent.observers = (Recorder(),)
    session = await agent.new_session("/tmp")
    handler = caplog.handler
    handler.addFilter(logcontext.ContextFilter())
    with caplog.at_level(logging.ERROR, logger="steerable_bridge.runtime.turns.loop"):
        outcome, sent = await prompt(session)
    assert outcome.error_code == "internal_error"
    (record,) = [r for r in caplog.records if r.name == "steerable_bridge.runtime.turns.loop"]
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "a bug in the adapter" in caplog.text and "Traceback" in caplog.text
    assert (record.session_id, record.run_id, record.trace_id) == (  # type: ignore[attr-defined]
        session.id,
        sent[0].run_id,
        "0af7651916cd43dd8448eb211c80319c",
    )


async def test_a_failing_observer_never_breaks_the_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        trace_id = None

        def event(self, event: ev.LoopEvent) -> None:
            raise RuntimeError("observer bug")

        def close(self) -> None:
            raise RuntimeError("observer bug")

    class BrokenObserver:
        def start(self, session_id: str, *, traceparent: str | None = None) -> RunWatch:
            return Broken()

    agent = make_agent(scripted({"text": "hello"}))
    agent.observers = (BrokenObserver(),)
    session = await agent.new_session("/tmp")
    outcome, sent = await prompt(session)
    assert outcome.stop_reason == "end_turn" and sent[-1].kind == "run_finished"
    assert "observer bug" in caplog.text


@dataclass
class Picky(Watch):
    kinds: frozenset[type[ev.EventBase]] = frozenset({ev.RunStarted, ev.TextEnd})


async def test_a_watch_with_kinds_is_told_of_those_only_and_the_others_of_everything() -> None:
    picky = Picky(None)
    recorder = Recorder()

    class PickyObserver:
        def start(self, session_id: str, *, traceparent: str | None = None) -> RunWatch:
            return picky

    agent = make_agent(scripted({"text": "hello there"}))
    agent.observers = (PickyObserver(), recorder)
    session = await agent.new_session("/tmp")
    _, sent = await prompt(session)
    assert kinds(picky.seen) == ["run_started", "text_end"]
    assert picky.closed
    assert kinds(recorder.watches[0].seen) == kinds(sent)
