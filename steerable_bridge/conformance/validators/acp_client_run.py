"""Running the ACP client validator as an agent process: stdio, the CLI flag, `-m`.

`serve_client_validator` serves a `ClientValidator` as an ACP agent over stdio (or given
asyncio streams, for tests) through the SDK's `run_agent`, with the validator's transcript
observing every raw message. `run_client_validator` is `steerable-bridge acp
--validate-client`: it serves until the client leaves, then writes the report and returns
the exit code the report implies. `python -m steerable_bridge.conformance.validators.
acp_client_run` does the same as the flag.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, cast

from acp import run_agent
from acp.interfaces import Agent

from steerable_bridge.conformance.validators.acp_client import ClientValidator
from steerable_bridge.conformance.validators.client_session import ValidatorSettings

__all__ = ["main", "run_client_validator", "serve_client_validator"]


async def serve_client_validator(
    validator: ClientValidator, input_stream: Any = None, output_stream: Any = None
) -> None:
    """Run `validator` as an ACP agent on stdio (or the given asyncio streams)."""
    await run_agent(
        cast(Agent, validator),  # a plain class on purpose: unimplemented → method not found
        input_stream,
        output_stream,
        use_unstable_protocol=True,
        observers=[validator.transcript.observe],
    )


def run_client_validator(args: argparse.Namespace) -> int:
    """Entry point for `steerable-bridge acp --validate-client`: serve until the client leaves."""
    import anyio

    if getattr(args, "junit", False) and not getattr(args, "report", None):
        from steerable_bridge.commands.common import ConfigError

        raise ConfigError("--junit needs --report PATH (the XML goes beside the JSON)")
    settings = ValidatorSettings(
        person_timeout=args.person_timeout, cancel_timeout=args.cancel_timeout
    )
    validator = ClientValidator(settings, report_path=args.report, junit=args.junit)
    try:
        anyio.run(serve_client_validator, validator)
    finally:
        if validator.last_report is None:
            validator.finish()
    if validator.last_report is not None:
        print(validator.last_report.summary_line(), file=sys.stderr)
        return validator.last_report.exit_code()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m steerable_bridge.conformance.validators.acp_client_run`: the same as the flag."""
    from steerable_bridge.commands.check import add_validate_client_options

    parser = argparse.ArgumentParser(prog="steerable-bridge-validate-client")
    add_validate_client_options(parser)
    return run_client_validator(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
