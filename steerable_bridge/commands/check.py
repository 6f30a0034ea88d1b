"""`steerable-bridge check agui URL` / `check acp -- CMD [ARGS...]`: grade someone else's server.

`check agui` POSTs a RunAgentInput (a default one, or `--input FILE`) to an AG-UI endpoint,
records the SSE stream (`--record PATH` keeps the raw bytes) and runs the conformance rules
on it. `check acp` spawns any ACP agent over stdio and runs the agent-side checks
(`--record PATH` keeps the JSON-RPC transcript as JSON lines). Both print one line per check
with its id (conformance findings carry their rule id), can write the report as JSON
(`--report PATH`, plus JUnit XML with `--junit`), and exit 0 when clean, 1 when any check
failed, 2 when the target could not be checked at all (the message says why).

It also holds the options of the ACP client validator (`add_validate_client_options`), which
`steerable-bridge acp` registers: this module stays light, so `--help` loads no SDK.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from steerable_bridge.commands.terminal import say

__all__ = ["add_validate_client_options", "register", "run_validate_client"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check", help="check another ACP agent or AG-UI endpoint against the protocol rules"
    )
    targets = parser.add_subparsers(dest="target", metavar="TARGET", required=True)

    agui = targets.add_parser("agui", help="POST a run to an AG-UI endpoint and check the stream")
    agui.add_argument("url", help="the endpoint, e.g. http://127.0.0.1:8000/agui")
    agui.add_argument("--input", metavar="FILE", help="a RunAgentInput JSON file to POST")
    agui.add_argument("--token", metavar="T", help="sent as 'Authorization: Bearer T'")
    agui.add_argument("--timeout", type=float, default=60.0, metavar="S", help="whole run (60)")
    _add_output_options(agui, record_help="keep the raw SSE stream in PATH")
    agui.set_defaults(func=_check_agui)

    acp = targets.add_parser(
        "acp", help="spawn an ACP agent and check it", usage="%(prog)s [OPTIONS] -- CMD [ARGS...]"
    )
    acp.add_argument(
        "--init-timeout",
        type=float,
        default=20.0,
        metavar="S",
        help="for initialize and session/new (20)",
    )
    acp.add_argument(
        "--prompt-timeout", type=float, default=90.0, metavar="S", help="per prompt (90)"
    )
    acp.add_argument(
        "--probe-timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="for answers that should be immediate: unknown method, parse error (5)",
    )
    acp.add_argument(
        "--tool-prompt",
        metavar="TEXT",
        default="",
        help="a prompt that makes the agent's model call a tool needing permission; grades"
        " the permission flow (skipped without it)",
    )
    acp.add_argument(
        "--fail-prompt",
        metavar="TEXT",
        default="",
        help="a prompt that makes the agent's turn fail (its model errors); grades that"
        " session/load still replays the turns after it (skipped without it)",
    )
    _add_output_options(acp, record_help="keep the JSON-RPC transcript (JSON lines) in PATH")
    acp.add_argument("command", nargs=argparse.REMAINDER, help="the agent command, after --")
    acp.set_defaults(func=_check_acp)


def _add_output_options(parser: argparse.ArgumentParser, *, record_help: str) -> None:
    parser.add_argument("--record", metavar="PATH", help=record_help)
    parser.add_argument("--report", metavar="PATH", help="write the report as JSON to PATH")
    parser.add_argument("--junit", action="store_true", help="with --report: JUnit XML beside it")
    parser.add_argument(
        "--format", choices=("text", "markdown", "json"), default="text", help="stdout format"
    )


def _check_agui(args: argparse.Namespace) -> int:
    import anyio

    from steerable_bridge.conformance.validators.check_agui import (
        CouldNotRun,
        check_agui_endpoint,
        load_run_input,
    )

    try:
        run_input = load_run_input(args.input) if args.input else None
        report = anyio.run(
            lambda: check_agui_endpoint(
                args.url,
                run_input=run_input,
                token=args.token,
                record=args.record,
                within=args.timeout,
            )
        )
    except CouldNotRun as err:
        say(f"steerable-bridge check agui: could not run: {err}", file=sys.stderr)
        return 2
    return _finish(report, args)


def _check_acp(args: argparse.Namespace) -> int:
    import anyio

    from steerable_bridge.conformance.validators.agent_probes import (
        AgentCheckSettings,
        CouldNotRun,
    )
    from steerable_bridge.conformance.validators.check_acp import check_acp_agent

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print(
            "steerable-bridge check acp: give the agent command after --,"
            " e.g. check acp -- steerable-bridge acp",
            file=sys.stderr,
        )
        return 2
    settings = AgentCheckSettings(
        init_timeout=args.init_timeout,
        prompt_timeout=args.prompt_timeout,
        probe_timeout=args.probe_timeout,
        tool_prompt=args.tool_prompt,
        fail_prompt=args.fail_prompt,
    )
    try:
        report = anyio.run(lambda: check_acp_agent(command, settings=settings, record=args.record))
    except CouldNotRun as err:
        say(f"steerable-bridge check acp: could not run: {err}", file=sys.stderr)
        return 2
    return _finish(report, args)


def _finish(report: Any, args: argparse.Namespace) -> int:
    from steerable_bridge.commands.terminal import json_printable
    from steerable_bridge.conformance.validators.report import write_report

    if args.format == "json":
        sys.stdout.write(json_printable(report.to_json()))
    elif args.format == "markdown":  # what the checked agent said is quoted, never obeyed
        say(report.to_markdown())
    else:
        say(report.to_text())
    if args.report:
        for path in write_report(report, args.report, junit=args.junit):
            print(f"report written to {path}", file=sys.stderr)
    code: int = report.exit_code()
    return code


def add_validate_client_options(parser: argparse.ArgumentParser) -> None:
    """The flags `steerable-bridge acp` takes for the client validator."""
    group = parser.add_argument_group("client validator")
    group.add_argument(
        "--validate-client",
        action="store_true",
        help="be a reference agent that walks the connected ACP client through every feature"
        " it advertised and grades it",
    )
    group.add_argument(
        "--report", metavar="PATH", help="with --validate-client: write the report as JSON here"
    )
    group.add_argument(
        "--junit", action="store_true", help="with --report: also write JUnit XML (PATH with .xml)"
    )
    group.add_argument(
        "--person-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds to wait for the person to answer a permission request (120)",
    )
    group.add_argument(
        "--cancel-timeout",
        type=float,
        default=90.0,
        metavar="S",
        help="seconds to wait for the person to press stop (90)",
    )


def run_validate_client(args: argparse.Namespace) -> int:
    """`steerable-bridge acp --validate-client`: the reference agent instead of the real one."""
    if args.junit and not args.report:
        from steerable_bridge.commands.errors import ConfigError

        raise ConfigError("--junit needs --report PATH (the XML goes beside the JSON)")
    from steerable_bridge.conformance.validators.acp_client_run import run_client_validator
    from steerable_bridge.conformance.validators.client_session import ValidatorSettings

    settings = ValidatorSettings(
        person_timeout=args.person_timeout, cancel_timeout=args.cancel_timeout
    )
    return run_client_validator(settings, report_path=args.report, junit=args.junit)
