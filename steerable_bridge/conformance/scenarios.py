"""The scenario corpus: scripted conversations, run through the real loop, compared normalised.

Each `scenarios/<name>.json` holds a scripted-model script (see `adapters/llm/scripted.py`),
the turns a client makes (prompt, AG-UI state / frontend tools / tool results / resume, how
it answers permission requests and questions (`ask_user`: live over ACP `elicitation/create`,
`answers` in the next run over AG-UI), and when it cancels, steers or queues a follow-up — named by
the LoopEvent kind that triggers it), the transports that can express it, and the expected
LoopEvent sequence, normalised (`normalize`: run-scoped events only; no session id, seq,
ts or trace id, nor wall-clock figures; ids renamed in order of first use; the model route
and the model request's prompt and tool list left out). `run_in_process(scenario)` plays it
through the runtime `Agent` with a `MemoryStore`; `live.py` plays it through the real
transports. A scenario's `quality` is the typed `QualitySettings`; the live runs pass it to
`--quality` as a JSON object (`quality_json`), so this module never reads the flag's text.
`load_scenarios()` reads the corpus shipped with the package.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from steerable_bridge.adapters.llm.scripted import Script, ScriptedProvider
from steerable_bridge.adapters.storage.memory import MemoryStore
from steerable_bridge.adapters.tools.kit import fixed_workspace_tools
from steerable_bridge.conformance.scenario_tools import scenario_tools
from steerable_bridge.runtime.agent_sessions.agent import Agent, AgentConfig, new_id
from steerable_bridge.runtime.agent_sessions.routing import ModelRouter
from steerable_bridge.runtime.encoding import codec
from steerable_bridge.runtime.events import LoopEvent
from steerable_bridge.runtime.model_quality.quality_settings import QualitySettings
from steerable_bridge.runtime.ports.model import ModelProvider
from steerable_bridge.runtime.ports.permissions import (
    PermissionAnswer,
    PermissionRequest,
    StaticPolicy,
)
from steerable_bridge.runtime.ports.questions import (
    QuestionAnswer,
    QuestionRequest,
    Questions,
    question_id_for,
)
from steerable_bridge.runtime.ports.tools import Tool
from steerable_bridge.runtime.turns.turn import (
    ClientToolResult,
    LoopSettings,
    QuestionReply,
    ResumeDecision,
    TurnInput,
)
from steerable_bridge.runtime.values import TextPart, canonical_json

__all__ = [
    "ROUTE",
    "Scenario",
    "Transport",
    "Turn",
    "TurnActions",
    "expected_json",
    "frontend_tools",
    "load_scenarios",
    "normalize",
    "quality_json",
    "refresh_expected",
    "run_in_process",
    "scenario_agent",
    "turn_input",
]

Transport = Literal["acp", "agui"]
ROUTE = "scripted:scenario"
"""The model route scenarios run on (in process and in the AG-UI app)."""
PermissionChoice = Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FrontendTool(_Strict):
    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolAnswer(_Strict):
    call_id: str
    text: str
    is_error: bool = False


class Approval(_Strict):
    call_id: str
    approved: bool


class QuestionChoice(_Strict):
    """How the person answers a question (ACP: live; AG-UI: `answers` of the next turn)."""

    action: Literal["accept", "decline", "cancel"] = "accept"
    content: dict[str, JsonValue] | None = None

    def answer(self) -> QuestionAnswer:
        content = canonical_json(self.content) if self.content is not None else None
        return QuestionAnswer(action=self.action, content_json=content)


class QuestionResume(QuestionChoice):
    """An AG-UI `resume[]` answer to the question of `ask_user` call `call_id`."""

    call_id: str


class Trigger(_Strict):
    """Act when the first event of kind `on` arrives (cancel, or send `text`)."""

    on: str
    text: str = ""


class Turn(_Strict):
    """One client request: a prompt (AG-UI: one run) and how the client behaves during it."""

    prompt: str | None = None
    state: JsonValue = None
    frontend_tools: list[FrontendTool] = Field(default_factory=list)
    tool_results: list[ToolAnswer] = Field(default_factory=list)
    resume: list[Approval] = Field(default_factory=list)
    permission: PermissionChoice = "allow_once"
    question: QuestionChoice = QuestionChoice(action="cancel")
    answers: list[QuestionResume] = Field(default_factory=list)
    cancel: Trigger | None = None
    steer: Trigger | None = None
    follow_up: Trigger | None = None
    compact: bool = False
    """Ask for a compaction (ACP `/compact`, AG-UI `forwardedProps.steerable.command`)."""


class Scenario(_Strict):
    name: str
    description: str
    transports: list[Transport]
    why_not: str = ""
    """Why a transport is missing from `transports` (shown in reports)."""
    max_steps: int = 25
    quality: QualitySettings = QualitySettings(mode="off")
    """The model-quality settings as an object of `QualitySettings` fields
    (`{"mode": "on", "max_tool_calls": 1}`; an unknown field is refused when the file loads);
    `quality_json` gives a live run's `--quality` text."""
    script: Script
    turns: list[Turn]
    expected: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def defers_approval(self) -> bool:
        """AG-UI-only scenarios answer approvals in the next run (interrupts), not live."""
        return "acp" not in self.transports


def quality_json(settings: QualitySettings) -> str:
    """The `--quality` text for `settings`: every field, as the JSON object the flag takes.

    A live run hands the spawned `steerable-bridge acp` exactly the value the in-process run
    uses; writing the fields out (not the `NAME=VALUE` mini-language, which the commands own)
    means nothing here restates a flag name."""
    return json.dumps(dataclasses.asdict(settings), sort_keys=True)


def load_scenarios(names: Iterable[str] = ()) -> list[Scenario]:
    """The shipped corpus (or the named scenarios), sorted by name."""
    wanted = set(names)
    folder = resources.files(__package__) / "scenarios"
    out = [
        Scenario.model_validate_json(entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".json") and (not wanted or entry.name[:-5] in wanted)
    ]
    return sorted(out, key=lambda s: s.name)


# -- normalisation ------------------------------------------------------------------------

_ID_KEYS = frozenset(
    {"run_id", "message_id", "parent_message_id", "parent_run_id", "compaction_id"}
)
_DROP = frozenset(
    {
        "session_id",
        "seq",
        "ts",
        "elapsed_ms",
        "trace_id",
        "client_run_id",
        "through_seq",
        "pre_tokens",
        "post_tokens",
        "approval_key",
    }
)
"""Left out: ids of the store, of traces and of the client's run, wall-clock measurements
(`soft_timeout.elapsed_ms`), what depends on the transport's seq numbering and prompt
(a compaction's `through_seq` and token estimates), and the log's own bookkeeping no wire
carries (`permission_resolved.approval_key`)."""


def _request_summary(request: dict[str, Any]) -> list[dict[str, Any]]:
    summary = []
    for message in request["messages"]:
        text = "".join(p.get("text", "") for p in message["content"] if p.get("type") == "text")
        item: dict[str, Any] = {"role": message["role"], "text": text}
        if message["tool_calls"]:
            item["calls"] = [c["call_id"] for c in message["tool_calls"]]
        if message["tool_call_id"]:
            item["answers"] = message["tool_call_id"]
        summary.append(item)
    return summary


_OMIT_WHEN_NULL = frozenset({"sandbox"})
"""Optional fields a story leaves out while unset, so stories written before them still hold."""


def normalize(events: Sequence[LoopEvent]) -> list[dict[str, Any]]:
    """Run-scoped events as JSON with ids renamed by first use and volatile fields left out."""
    names: dict[str, str] = {}

    def rename(value: str) -> str:
        if value not in names:
            names[value] = f"id{len(names) + 1}"
        return names[value]

    out = []
    for event in events:
        if not event.run_id:
            continue
        data = codec.event_to_jsonable(event)
        item: dict[str, Any] = {}
        for key, value in data.items():
            if key in _DROP or (key in _OMIT_WHEN_NULL and value is None):
                continue
            if key in _ID_KEYS and isinstance(value, str):
                value = rename(value)
            elif key == "model" and value is not None:
                value = "<model>"
            elif key == "request":
                value = _request_summary(value)
            item[key] = value
        out.append(item)
    return out


# -- in process ---------------------------------------------------------------------------


def frontend_tools(turn: Turn) -> tuple[Tool, ...]:
    return tuple(
        Tool(
            name=t.name,
            description=t.description,
            parameters=dict(t.parameters),
            executor="frontend",
        )
        for t in turn.frontend_tools
    )


def turn_input(turn: Turn) -> TurnInput:
    """What the runtime gets for a turn (the transports derive the same from their wire)."""
    return TurnInput(
        content=(TextPart(text=turn.prompt),) if turn.prompt else (),
        tool_results=tuple(
            ClientToolResult(
                call_id=a.call_id, content=(TextPart(text=a.text),), is_error=a.is_error
            )
            for a in turn.tool_results
        ),
        resume=tuple(ResumeDecision(call_id=a.call_id, approved=a.approved) for a in turn.resume),
        answers=tuple(
            QuestionReply(question_id=question_id_for(a.call_id), answer=a.answer())
            for a in turn.answers
        ),
        state_json=canonical_json(turn.state) if turn.state is not None else None,
        client_tools=frontend_tools(turn),
        compact=turn.compact,
    )


def scenario_agent(scenario: Scenario, provider: ModelProvider | None = None) -> Agent:
    """An agent on a fresh scripted provider, with the scenario tool set registered.

    `provider` replaces the scripted one (still on route `ROUTE`): a real adapter talking to
    a server that replays the script's rounds in its own wire format."""
    chosen = provider or ScriptedProvider(scenario.script, route=ROUTE)
    router = ModelRouter()
    router.register("scripted", lambda model: chosen)
    router.offer(ROUTE)
    config = AgentConfig(
        model=ROUTE,
        approval="ask",
        loop=LoopSettings(max_steps=scenario.max_steps, new_id=new_id),
        quality=scenario.quality,
    )
    agent = Agent(router=router, store=MemoryStore(), config=config)
    tools = scenario_tools()
    names = {tool.name for tool in tools}
    # `steerable-bridge acp` gives every session the workspace tools; offer the same names
    # here so that a message listing the known tools reads the same on every path.
    workspace = tuple(
        t for t in fixed_workspace_tools(tempfile.gettempdir()) if t.name not in names
    )
    for tool in (*tools, *workspace):
        agent.tools.register(tool)
    return agent


class TurnActions:
    """Fires a turn's cancel / steer / follow-up triggers once each, on the first matching kind.

    `act(name, text)` is the transport-specific way to do it; every runner uses this class so
    the triggers mean the same everywhere.
    """

    def __init__(self, turn: Turn, act: Callable[[str, str], Any]) -> None:
        self._pending = {
            name: trigger
            for name, trigger in (
                ("cancel", turn.cancel),
                ("steer", turn.steer),
                ("follow_up", turn.follow_up),
            )
            if trigger is not None
        }
        self._act = act

    def due(self, kind: str) -> list[tuple[str, str]]:
        """The actions the first event of `kind` fires (each fires once)."""
        fired = [(n, t.text) for n, t in self._pending.items() if t.on == kind]
        for name, _ in fired:
            del self._pending[name]
        return fired

    async def observe(self, event: LoopEvent) -> None:
        for name, text in self.due(event.kind):
            result = self._act(name, text)
            if hasattr(result, "__await__"):
                await result


async def run_in_process(
    scenario: Scenario, *, timeout_s: float = 30.0, provider: ModelProvider | None = None
) -> list[LoopEvent]:
    """Play the scenario through the runtime; every event of the session's log.

    `provider` replaces the scripted model (see `scenario_agent`)."""
    agent = scenario_agent(scenario, provider)
    session = await agent.new_session("/")

    def act(name: str, text: str) -> None:
        if name == "cancel":
            session.cancel()
        elif name == "steer":
            session.steer((TextPart(text=text),))
        else:
            session.follow_up((TextPart(text=text),))

    for turn in scenario.turns:
        choice = turn.permission

        async def ask(
            request: PermissionRequest, choice: PermissionChoice = choice
        ) -> PermissionAnswer:
            return PermissionAnswer(outcome=choice, option_id=choice)

        async def answer(
            request: QuestionRequest, choice: QuestionChoice = turn.question
        ) -> QuestionAnswer:
            return choice.answer()

        session.policy = StaticPolicy("ask", ask, defer=scenario.defers_approval)
        # both transports offer `ask_user` (ACP: the scenario client advertises forms)
        session.questions = Questions(ask=None if scenario.defers_approval else answer)
        actions = TurnActions(turn, act)
        with anyio.fail_after(timeout_s):
            await session.prompt(turn_input(turn), actions.observe)
    return list(session.log.view())


def expected_json(events: Sequence[LoopEvent]) -> str:
    """The `expected` list as it is written into a scenario file."""
    return json.dumps(normalize(events), indent=1, ensure_ascii=False)


async def refresh_expected(path: str) -> None:
    """Rewrite a scenario file's `expected` from the real loop (after a deliberate change)."""
    file = anyio.Path(path)
    data = json.loads(await file.read_text(encoding="utf-8"))
    events = await run_in_process(Scenario.model_validate(data))
    data["expected"] = normalize(events)
    await file.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
