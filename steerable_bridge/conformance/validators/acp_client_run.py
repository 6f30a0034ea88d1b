"""Running the ACP client validator as an agent process on stdio.

`serve_client_validator` serves a `ClientValidator` as an ACP agent over stdio (or given
asyncio streams, for tests) through the SDK's `run_agent`, with the validator's transcript
observing every raw message. `run_client_validator` serves until the client leaves, then
writes the report and returns the exit code the report implies. It takes typed settings, not
parsed arguments: the `steerable-bridge acp --validate-client` flag and its options live in
`commands/check.py`, which calls it (the library never reaches up into the commands).
"""

from __future__ import annotations

import sys
from typing import Any, cast

from acp import run_agent
from acp.interfaces import Agent

from steerable_bridge.conformance.validators.acp_client import ClientValidator
from steerable_bridge.conformance.validators.client_session import ValidatorSettings

__all__ = ["run_client_validator", "serve_client_validator"]


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


def run_client_validator(
    settings: ValidatorSettings, *, report_path: str | None = None, junit: bool = False
) -> int:
    """Serve a validator on stdio until the client leaves, write its report (JSON at
    `report_path`, JUnit XML beside it with `junit`) and return the exit code it implies."""
    import anyio

    validator = ClientValidator(settings, report_path=report_path, junit=junit)
    try:
        anyio.run(serve_client_validator, validator)
    finally:
        if validator.last_report is None:
            validator.finish()
    if validator.last_report is not None:
        print(validator.last_report.summary_line(), file=sys.stderr)
        return validator.last_report.exit_code()
    return 0
