"""`steerable-bridge run PROMPT`: one turn from a terminal.

Streams the assistant's text to stdout and shows reasoning, tool activity and the plan
compactly on stderr; `--jsonl` prints every LoopEvent as one JSON object a line instead.
The agent gets the workspace tools (read, write, edit, list, glob, grep, run_command)
confined to `--cwd` (default: the current directory) unless `--no-workspace` is given.
With `--approve ask` (the default) an edit or a command is put to the person at the
terminal first (yes / no, and always / never when the call has a shape to keep); without
a terminal it is refused, and the message says to pass `--approve all`; `--approve all` /
`none` decide without asking.
`--session ID` continues a stored session instead of starting one. Exit status: 0 when the
turn finished, 1 when it failed (the error is on stderr), 2 for a configuration mistake.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from steerable_bridge.commands.common import (
    add_agent_options,
    add_tool_process_options,
    build_agent,
    command_policy,
)


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

    from steerable_bridge.commands.common import ConfigError

    if not args.no_workspace and not os.path.isdir(args.cwd):
        raise ConfigError(f"--cwd {args.cwd} is not a directory; pass a folder")

    return anyio.run(_run, args)


async def _run(args: argparse.Namespace) -> int:
    from steerable_bridge.adapters.tools.builtin import builtin_tools
    from steerable_bridge.runtime import codec
    from steerable_bridge.runtime import events as ev
    from steerable_bridge.runtime.permissions import (
        PermissionAnswer,
        PermissionRequest,
        StaticPolicy,
    )
    from steerable_bridge.runtime.turn import TurnInput
    from steerable_bridge.runtime.values import TextPart

    tools = builtin_tools()
    if not args.no_workspace:
        from steerable_bridge.adapters.tools.kit import fixed_workspace_tools

        names = {tool.name for tool in tools}
        offered = fixed_workspace_tools(args.cwd, policy=command_policy(args))
        tools += tuple(t for t in offered if t.name not in names)
    agent = build_agent(args, tools=tools)
    from steerable_bridge.runtime.session import SessionBusy
    from steerable_bridge.runtime.storage import StoreError

    try:
        if args.session:
            session = await agent.load_session(args.session)
            session.default_model = args.model  # this command's --model, not the stored one
        else:
            session = await agent.new_session(args.cwd)
    except StoreError as error:
        print(f"error [{error.code}]: {error.message}", file=sys.stderr)
        return 1
    out, err = sys.stdout, sys.stderr

    async def ask(request: PermissionRequest) -> PermissionAnswer:
        if not sys.stdin.isatty():
            print(
                f"[denied] {request.title}: no terminal to ask; pass --approve all to allow",
                file=err,
            )
            return PermissionAnswer(outcome="reject_once", option_id="reject_once")
        offered = {o.kind: o.name for o in request.options}
        choices = {"y": "allow_once"}
        question = f"Allow {request.title}? [y]es"
        if "allow_always" in offered:  # not offered for a command that could smuggle another
            choices |= {"a": "allow_always", "N": "reject_always"}
            question += f" / [a] {offered['allow_always']}"
        question += " / [n]o" + (" / [N]ever: " if "N" in choices else ": ")
        reply = await anyio.to_thread.run_sync(input, question)
        outcome = choices.get(reply.strip()[:1], "reject_once")
        return PermissionAnswer(outcome=outcome, option_id=outcome)  # type: ignore[arg-type]

    import anyio

    session.policy = StaticPolicy(args.approve, ask)

    async def sink(event: ev.LoopEvent) -> None:
        if args.jsonl:
            out.write(codec.event_to_json(event) + "\n")
            out.flush()
            return
        if isinstance(event, ev.TextDelta):
            out.write(event.delta)
            out.flush()
        elif isinstance(event, ev.TextEnd):
            out.write("\n")
        elif isinstance(event, ev.ReasoningDelta):
            err.write(event.delta)
        elif isinstance(event, ev.ReasoningEnd):
            err.write("\n")
        elif isinstance(event, ev.ToolCallEnd):
            print(f"[tool] {event.title or event.name}", file=err)
        elif isinstance(event, ev.ToolFinished):
            detail = event.error.message if event.error else ""
            print(f"[tool] {event.status} {detail}".rstrip(), file=err)
        elif isinstance(event, ev.PlanUpdated):
            for entry in event.entries:
                print(f"[plan] {entry.status:<11} {entry.content}", file=err)
        elif isinstance(event, ev.RunFailed):
            print(f"error [{event.code}]: {event.message}", file=err)

    try:
        outcome = await session.prompt(
            TurnInput(content=(TextPart(text=" ".join(args.prompt)),)), sink
        )
    except (StoreError, SessionBusy) as error:
        code = getattr(error, "code", "store_error")
        print(f"error [{code}]: {error}", file=sys.stderr)
        return 1
    return 1 if outcome.error_code else 0
