"""Slash commands typed in the editor's prompt box: `/help`, `/mode <id>`, `/model <route>`,
`/compact`.

The agent advertises them (`slash_commands(modes)`, for the modes the agent port offers)
with `available_commands_update` after `session/new` and `session/load`;
`SlashCommands.handle` intercepts a prompt that is one of them and answers without a model
turn. `/mode` and `/model` do exactly what `session/set_mode` and
`session/set_config_option` do (logged `mode_changed` / `config_changed`, then the matching
update). The short reply is sent as `agent_message_chunk`s *without* `_meta.steerable`: it
is not a LoopEvent and is not replayed by `session/load`. Anything else starting with `/`
goes to the model unchanged. `/compact` is a turn of its own (the agent runs
`TurnInput(compact=True)`: `run_started`, `compaction`, `run_finished`, no model call); its
reply is the rendered `compaction` event (an `agent_message_chunk` with the event's
headline, "Compacted 3 turns: 6,120 → 1,450 tokens.", and the event in `_meta`). When the
turn sent no `compaction` — nothing to fold, or its summary would not have been smaller
(the run's `RunOutcome.notice` says so) — `after_compact` says so in a short reply like
`/help`'s. Everything here goes through the agent (`AcpAgent`) and its port.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from acp import RequestError
from acp import schema as acp

from steerable_bridge.runtime.turns.turn import RunOutcome
from steerable_bridge.runtime.values import Command

if TYPE_CHECKING:
    from steerable_bridge.runtime.ports.port import AgentPort, Conversation
    from steerable_bridge.transports.acp.content import PromptBlock
    from steerable_bridge.transports.acp.session import AcpSession

__all__ = [
    "NOTHING_TO_COMPACT",
    "SlashCommands",
    "SlashHost",
    "is_compact",
    "parse",
    "slash_commands",
]


def slash_commands(modes: Sequence[tuple[str, str, str]]) -> tuple[Command, ...]:
    """The slash commands a session announces (`available_commands_update`), for the
    agent's `modes` ((id, name, description), as `PortInfo.modes` lists them)."""
    return (
        Command(name="help", description="Show the commands, modes and models this agent offers"),
        Command(
            name="mode",
            description="Switch the permission mode: " + ", ".join(mode for mode, _, _ in modes),
            input_hint="mode id",
        ),
        Command(name="model", description="Switch the model route", input_hint="provider:model"),
        Command(
            name="compact",
            description="Summarize the conversation so far to free the model's context",
        ),
    )


NOTHING_TO_COMPACT = (
    "Nothing to compact: everything since the last compaction fits in the turns kept verbatim."
)

NAMES = ("help", "mode", "model", "compact")


def parse(prompt: Sequence[PromptBlock]) -> tuple[str, str] | None:
    """(command, argument) when the prompt is exactly one of our slash commands."""
    if len(prompt) != 1 or not isinstance(prompt[0], acp.TextContentBlock):
        return None
    text = prompt[0].text.strip()
    if not text.startswith("/"):
        return None
    name, _, argument = text[1:].partition(" ")
    if name not in NAMES:
        return None
    return name, argument.strip()


def is_compact(prompt: Sequence[PromptBlock]) -> bool:
    """True when the prompt is `/compact` (which runs as a turn, not as a reply)."""
    parsed = parse(prompt)
    return parsed is not None and parsed[0] == "compact"


class SlashHost(Protocol):
    """What the slash commands reach on the ACP agent (`AcpAgent` in `agent.py`); naming it
    here keeps this module from importing the agent module, which imports this one."""

    port: AgentPort

    async def conversation(self, state: AcpSession) -> Conversation: ...

    async def change_mode(self, state: AcpSession, mode_id: str) -> None: ...

    async def change_model(self, state: AcpSession, route: str) -> None: ...


class SlashCommands:
    """Runs the slash commands of one ACP agent."""

    def __init__(self, agent: SlashHost) -> None:
        self._agent = agent

    async def handle(
        self, state: AcpSession, prompt: Sequence[PromptBlock]
    ) -> acp.PromptResponse | None:
        """The prompt's response when it was a slash command, else None."""
        parsed = parse(prompt)
        if parsed is None:
            return None
        name, argument = parsed
        if name == "compact":
            return None  # a turn of its own: the agent runs it
        if name == "help":
            reply = await self._help(state)
        elif name == "mode":
            reply = await self._switch(state, argument, mode=True)
        else:
            reply = await self._switch(state, argument, mode=False)
        await state.send(
            acp.AgentMessageChunk(
                session_update="agent_message_chunk",
                content=acp.TextContentBlock(type="text", text=reply),
            )
        )
        return acp.PromptResponse(stop_reason="end_turn")

    async def after_compact(self, state: AcpSession, outcome: RunOutcome) -> None:
        """Tell the user when their `/compact` turn found nothing to fold (a compaction
        answers for itself: its rendered event is the reply)."""
        if state.compacted_in == outcome.run_id:
            return
        reply = outcome.notice or NOTHING_TO_COMPACT
        await state.send(
            acp.AgentMessageChunk(
                session_update="agent_message_chunk",
                content=acp.TextContentBlock(type="text", text=reply),
            )
        )

    async def _help(self, state: AcpSession) -> str:
        conversation = await self._agent.conversation(state)
        info = self._agent.port.info()
        modes = "\n".join(
            f"- `{mode_id}`{' (current)' if mode_id == conversation.mode else ''}: {description}"
            for mode_id, _, description in info.modes
        )
        models = "\n".join(
            f"- `{route}`{' (current)' if route == conversation.model else ''}"
            for route in info.models
        )
        return (
            "Commands:\n- `/help`: this text\n- `/mode <id>`: switch the permission mode\n"
            "- `/model <provider:model>`: switch the model\n"
            f"- `/compact`: summarize the conversation so far\n\nModes:\n{modes}\n\n"
            f"Models:\n{models}\n"
        )

    async def _switch(self, state: AcpSession, argument: str, *, mode: bool) -> str:
        what = "mode" if mode else "model"
        if not argument:
            conversation = await self._agent.conversation(state)
            current = conversation.mode if mode else conversation.model
            info = self._agent.port.info()
            choices = ", ".join(m for m, _, _ in info.modes) if mode else ", ".join(info.models)
            return f"The {what} is `{current}`. Choose one of: {choices}"
        try:
            if mode:
                await self._agent.change_mode(state, argument)
            else:
                await self._agent.change_model(state, argument)
        except RequestError as error:
            return str(error)
        return f"The {what} is now `{argument}`."
