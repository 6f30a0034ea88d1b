"""A small harness for driving real turns in tests: an Agent on an in-memory store, a
provider of the test's choosing, and helpers to read what the turn logged."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import anyio

from steerable_bridge.adapters.llm.scripted import Script, ScriptedProvider
from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.agent_sessions.session import Session
from steerable_bridge.runtime.model_context.compaction import CompactionSettings
from steerable_bridge.runtime.model_quality.quality import QualitySettings
from steerable_bridge.runtime.ports.model import ModelProvider, ModelRequest
from steerable_bridge.runtime.ports.permissions import Approval
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.turns.turn import LoopSettings, RunOutcome, TurnInput
from steerable_bridge.runtime.values import TextPart

E = TypeVar("E", bound=ev.EventBase)


def scripted(*rounds: dict[str, Any], loop: bool = False, **script: Any) -> ScriptedProvider:
    return ScriptedProvider(Script.model_validate({"rounds": list(rounds), "loop": loop, **script}))


def make_agent(
    provider: ModelProvider,
    *,
    tools: Sequence[Tool] = (),
    approval: Approval = "all",
    max_steps: int = 25,
    store: MemoryStore | None = None,
    quality: QualitySettings | None = None,
    compaction: CompactionSettings | None = None,
    max_sessions: int = 256,
    **loop: Any,
) -> Agent:
    router = ModelRouter()
    router.register("test", lambda name: provider)
    counter = itertools.count()
    limits: dict[str, Any] = {"model_timeout_s": 10, "permission_timeout_s": 5, **loop}
    settings = LoopSettings(
        max_steps=max_steps, new_id=lambda prefix: f"{prefix}_{next(counter)}", **limits
    )
    config = AgentConfig(
        model="test:m",
        approval=approval,
        loop=settings,
        quality=quality or QualitySettings(mode="off"),
        compaction=compaction or CompactionSettings(),
        max_sessions=max_sessions,
    )
    agent = Agent(router=router, store=store or MemoryStore(), config=config)
    for tool in tools:
        agent.tools.register(tool)
    return agent


async def prompt(
    session: Session,
    text: str = "hi",
    *,
    on_event: Callable[[ev.LoopEvent], Any] | None = None,
) -> tuple[RunOutcome, list[ev.LoopEvent]]:
    """Run one turn; returns its outcome and the events the sink received."""
    seen: list[ev.LoopEvent] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)
        if on_event is not None:
            on_event(event)

    with anyio.fail_after(10):
        outcome = await session.prompt(TurnInput(content=(TextPart(text=text),)), sink)
    return outcome, seen


def kinds(events: Sequence[ev.LoopEvent]) -> list[str]:
    return [e.kind for e in events]


def of(events: Sequence[ev.LoopEvent], cls: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, cls)]


def index(events: Sequence[ev.LoopEvent], predicate: Callable[[ev.LoopEvent], bool]) -> int:
    return next(i for i, e in enumerate(events) if predicate(e))


def assert_well_formed(events: Sequence[ev.LoopEvent]) -> None:
    """Nothing dangles: starts have ends, calls have results, steps finish, one run end."""
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs)), "seq must strictly increase"
    starts = {e.message_id for e in of(events, ev.TextStart)}
    assert starts == {e.message_id for e in of(events, ev.TextEnd)}
    starts = {e.message_id for e in of(events, ev.ReasoningStart)}
    assert starts == {e.message_id for e in of(events, ev.ReasoningEnd)}
    started_calls = sorted(e.call_id for e in of(events, ev.ToolCallStart))
    ended_calls = sorted(e.call_id for e in of(events, ev.ToolCallEnd))
    assert started_calls == ended_calls
    finished = sorted(e.call_id for e in of(events, ev.ToolFinished))
    assert finished == ended_calls, "every tool_call_end needs exactly one tool_finished"
    assert len(of(events, ev.StepStarted)) == len(of(events, ev.StepFinished))
    ends = [e for e in events if isinstance(e, ev.RunFinished | ev.RunFailed)]
    assert len(ends) == 1 and ends[0] is events[-1]


def text_tool(name: str = "echo", *, kind: str = "read", **options: Any) -> Tool:
    """A tool that answers with its `text` argument."""

    async def handler(args: dict[str, Any], ctx: Any) -> Any:
        from steerable_bridge.runtime.ports.tools import ToolResult

        return ToolResult(content=(TextPart(text=f"{name}: {args.get('text', '')}"),))

    settings: dict[str, Any] = {
        "name": name,
        "description": f"{name} tool",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        "kind": kind,
        "handler": handler,
        **options,
    }
    return Tool(**settings)


# -- tool calls and the runs that answer them ------------------------------------------------


def call(call_id: str, name: str = "echo", **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


async def new_session(provider: Any, **options: Any) -> Session:
    return await make_agent(provider, **options).new_session("/work")


def requests(session: Session) -> list[ModelRequest]:
    return [e.request for e in of(list(session.log.view()), ev.ModelRequestEvent)]


async def answer(session: Session, **turn: Any) -> tuple[Any, list[ev.LoopEvent]]:
    """A run that only answers what the last one left open."""
    seen: list[ev.LoopEvent] = []

    async def sink(event: ev.LoopEvent) -> None:
        seen.append(event)

    with anyio.fail_after(10):
        outcome = await session.prompt(TurnInput(**turn), sink)
    return outcome, seen


def finished(events: list[ev.LoopEvent]) -> dict[str, ev.ToolFinished]:
    return {e.call_id: e for e in of(events, ev.ToolFinished)}


def assert_every_call_finished_once(session: Session) -> None:
    """Over the whole log (a call may end in the run after the one that made it)."""
    logged = list(session.log.view())
    made = sorted(e.call_id for e in of(logged, ev.ToolCallEnd))
    assert sorted(e.call_id for e in of(logged, ev.ToolFinished)) == made
