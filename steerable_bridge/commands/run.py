"""`steerable-bridge run PROMPT`: one turn from a terminal.

Streams the assistant's text to stdout and shows reasoning, tool activity and the plan
compactly on stderr; `--jsonl` prints every LoopEvent as one JSON object a line instead.
The agent gets the workspace tools (read, write, edit, list, glob, grep, run_command)
confined to `--cwd` (default: the current directory) unless `--no-workspace` is given.
With `--approve ask` (the default) an edit or a command is put to the person at the
terminal first (yes / no, and always / never when the call has a shape to keep), showing
the diff or the command line; the
answer is read from the terminal alone (`approval_prompt.py`), and without one the call is
refused and the message says to pass `--approve all`; `--approve all` / `none` decide without
asking. Ctrl-C cancels the turn at once (it ends `cancelled`; exit 130), a second one stops
outright. A command's output is shown by its last lines; at the end stderr names the session
(`--session ID` continues it). A closed stdout (`run ... | head`) ends the turn quietly
(exit 141). Control characters in what it prints (a model's text, file names) are shown
escaped (`terminal.py`). Exit status: 0 when the turn finished, 1 when it failed (the error
is on stderr), 2 for a configuration mistake (a store that cannot be opened included: it is
checked before the turn starts). Like the transports, it reaches the runtime only through
the agent port (`LocalPort`): the session is opened or loaded with the terminal's asker
attached, and the turn, Ctrl-C and a closed stdout go through `prompt` and `cancel`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, TextIO

from steerable_bridge.commands.common import add_agent_options, build_agent
from steerable_bridge.commands.tool_processes import add_tool_process_options, command_policy

if TYPE_CHECKING:
    import anyio

    from steerable_bridge.commands.approval_prompt import TerminalAsker
    from steerable_bridge.runtime.events import LoopEvent, ToolFinished
    from steerable_bridge.runtime.ports.port import AgentPort
    from steerable_bridge.runtime.ports.tools import Tool

OUTPUT_LINES = 10
"""A command's output is shown on stderr up to its last this many lines."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("run", help="run one turn and print the answer")
    add_agent_options(parser)
    parser.add_argument("--jsonl", action="store_true", help="print LoopEvents as JSON lines")
    parser.add_argument(
        "--cwd",
        type=os.path.abspath,
        default=os.getcwd(),
        help="the session's working directory; the workspace tools work inside it",
    )
    parser.add_argument(
        "--no-workspace",
        action="store_true",
        help="offer no workspace tools (only the built-in ones: calculate, update_plan)",
    )
    add_tool_process_options(parser)
    parser.add_argument(
        "--session",
        metavar="ID",
        help="continue this stored session with this command's --model"
        " (see `steerable-bridge sessions list`)",
    )
    parser.add_argument("prompt", nargs="+", help="what to ask")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    import anyio

    from steerable_bridge.commands.errors import ConfigError
    from steerable_bridge.commands.storage_choice import check_storage

    if not args.no_workspace and not os.path.isdir(args.cwd):
        raise ConfigError(f"--cwd {args.cwd} is not a directory; pass a folder")
    check_storage(args.storage)

    return anyio.run(_run, args)


async def _run(args: argparse.Namespace) -> int:
    import anyio

    from steerable_bridge.commands.approval_prompt import TerminalAsker
    from steerable_bridge.commands.pipes import CLOSED_PIPE_EXIT, silence_output
    from steerable_bridge.commands.startup import startup_line
    from steerable_bridge.commands.terminal import say
    from steerable_bridge.runtime import events as ev
    from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
    from steerable_bridge.runtime.ports.permissions import PermissionAnswer, PermissionRequest
    from steerable_bridge.runtime.ports.port import Attachments
    from steerable_bridge.runtime.turns.turn import TurnInput
    from steerable_bridge.runtime.values import TextPart

    port = LocalPort(build_agent(args, tools=_tools(args)))
    workspace = None if args.no_workspace else args.cwd
    print(startup_line(args.model, args.storage, workspace), file=sys.stderr)
    from steerable_bridge.runtime.agent_sessions.session import SessionBusy
    from steerable_bridge.runtime.ports.storage import StoreError

    out, err = sys.stdout, sys.stderr
    asker = TerminalAsker.open(args.cwd) if args.approve == "ask" else None

    async def refuse(request: PermissionRequest) -> PermissionAnswer:
        say(
            f"[denied] {request.title}: no terminal to ask (--approve ask);"
            " pass --approve all to allow",
            file=err,
        )
        return PermissionAnswer(outcome="reject_once", option_id="reject_once")

    async def attach(conversation_id: str) -> Attachments:
        return Attachments(asker=asker or refuse)  # asked here, never deferred

    try:
        if args.session:  # with this command's --model, not the stored one
            conversation = await port.load(args.session, model=args.model, attach=attach)
        else:
            conversation = await port.open(args.cwd, attach=attach)
    except StoreError as error:
        say(f"error [{error.code}]: {error.message}", file=sys.stderr)
        await _close(port, asker)
        return 1
    session_id = conversation.conversation_id
    kinds: dict[str, str] = {}

    closed = False

    async def sink(event: ev.LoopEvent) -> None:
        nonlocal closed
        if closed:
            return
        try:
            _show(event, jsonl=args.jsonl, out=out, err=err, kinds=kinds)
        except BrokenPipeError:  # `run ... | head` read enough: stop the turn, quietly
            closed = True
            silence_output()
            await port.cancel(session_id, "the reader of the output went away")

    turn = TurnInput(content=(TextPart(text=" ".join(args.prompt)),))
    outcome = None
    failure: StoreError | SessionBusy | None = None
    try:
        async with anyio.create_task_group() as watch:
            watch.start_soon(_cancel_on_interrupt, port, session_id, watch.cancel_scope)
            try:
                outcome = await port.prompt(session_id, turn, sink)
            except (StoreError, SessionBusy) as error:  # caught here: not in an ExceptionGroup
                failure = error
            finally:
                watch.cancel_scope.cancel()
    finally:
        await _close(port, asker)
    if failure is not None:
        code = getattr(failure, "code", "store_error")
        say(f"error [{code}]: {failure}", file=sys.stderr)
        return 1
    if closed:
        return CLOSED_PIPE_EXIT
    print(f"session: {session_id} (continue with --session {session_id})", file=err)
    if outcome is None or outcome.stop_reason == "cancelled":
        print("[cancelled]", file=err)
        return 130
    return 1 if outcome.error_code else 0


def _tools(args: argparse.Namespace) -> tuple[Tool, ...]:
    """The built-in tools, and the workspace tools in `--cwd` unless `--no-workspace`."""
    from steerable_bridge.adapters.tools.builtin import builtin_tools

    tools = builtin_tools()
    if not args.no_workspace:
        from steerable_bridge.adapters.tools.kit import fixed_workspace_tools

        names = {tool.name for tool in tools}
        offered = fixed_workspace_tools(args.cwd, policy=command_policy(args))
        tools += tuple(t for t in offered if t.name not in names)
    return tools


def _show(
    event: LoopEvent, *, jsonl: bool, out: TextIO, err: TextIO, kinds: dict[str, str]
) -> None:
    """Print one event of the turn: text on `out`, the rest compactly on `err` (every event
    as a JSON line on `out` with `--jsonl`); `kinds` remembers each tool call's kind."""
    from steerable_bridge.commands.terminal import json_printable, printable, say
    from steerable_bridge.runtime import events as ev
    from steerable_bridge.runtime.encoding import codec

    if jsonl:
        out.write(json_printable(codec.event_to_json(event)) + "\n")
        out.flush()
        return
    if isinstance(event, ev.TextDelta):
        out.write(printable(event.delta))
        out.flush()
    elif isinstance(event, ev.TextEnd):
        out.write("\n")
    elif isinstance(event, ev.ReasoningDelta):
        err.write(printable(event.delta))
    elif isinstance(event, ev.ReasoningEnd):
        err.write("\n")
    elif isinstance(event, ev.ToolCallEnd):
        kinds[event.call_id] = event.tool_kind
        say(f"[tool] {event.title or event.name}", file=err)
    elif isinstance(event, ev.ToolFinished):
        detail = event.error.message if event.error else ""
        say(f"[tool] {event.status} {detail}".rstrip(), file=err)
        for line in shown_output(event, kinds.get(event.call_id, "other")):
            say(f"  {line}", file=err)
    elif isinstance(event, ev.PlanUpdated):
        for entry in event.entries:
            say(f"[plan] {entry.status:<11} {entry.content}", file=err)
    elif isinstance(event, ev.RunFailed):
        say(f"error [{event.code}]: {event.message}", file=err)


async def _close(port: AgentPort, asker: TerminalAsker | None) -> None:
    """Let the terminal go and shut the agent down (bounded: the turn is over)."""
    import anyio

    if asker is not None:
        asker.close()
    with anyio.move_on_after(10, shield=True):
        await port.aclose()


async def _cancel_on_interrupt(port: AgentPort, session_id: str, hard: anyio.CancelScope) -> None:
    """Ctrl-C cancels the turn (it ends `cancelled`); a second Ctrl-C stops at once."""
    import anyio

    first = True
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            if first and await port.cancel(session_id, "cancelled at the terminal (Ctrl-C)"):
                print("\n[cancelling: Ctrl-C again stops at once]", file=sys.stderr)
                first = False
                continue
            hard.cancel()
            return


def shown_output(event: ToolFinished, kind: str) -> list[str]:
    """What a tool reported, for the terminal: the last lines of a command's output, an
    edit's one-line summary; nothing for tools that only read."""
    from steerable_bridge.runtime.values import TextPart

    if kind not in ("execute", "edit", "delete", "move"):
        return []
    text = "".join(part.text for part in event.content if isinstance(part, TextPart))
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= OUTPUT_LINES:
        return lines
    return [f"... {len(lines) - OUTPUT_LINES} earlier lines", *lines[-OUTPUT_LINES:]]
