"""The model-call deadlines from the command line and the environment, for every agent command.

`--model-deadline SECONDS` (`STEERABLE_MODEL_DEADLINE`, default 300) bounds one whole model
call, connect to last byte, retries included; `--model-idle-timeout SECONDS`
(`STEERABLE_MODEL_IDLE_TIMEOUT`, default 120) bounds the wait for the next token (a text,
reasoning or tool-call delta; keep-alives do not count); the variables are fields of
`settings.AgentSettings`. The HTTP providers enforce both
(`adapters/llm/deadlines.py`); the loop's own bound on a model step
(`LoopSettings.model_timeout_s`) is set a little past the call deadline, so a provider's
clearer error wins and providers without HTTP are still bounded. A bad value is a
`ValueError` naming the option and what it accepts (the commands report a `ConfigError`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from steerable_bridge.commands.setting_values import positive_seconds

if TYPE_CHECKING:
    from steerable_bridge.adapters.llm.deadlines import CallDeadlines
    from steerable_bridge.commands.settings import AgentSettings

__all__ = [
    "STEP_GRACE_S",
    "add_deadline_options",
    "deadlines_from_args",
    "seconds_text",
]

STEP_GRACE_S = 5.0
"""How far past the call deadline the loop's own bound on a model step lies."""


def add_deadline_options(
    parser: argparse.ArgumentParser, settings: AgentSettings | None = None
) -> None:
    """The two options, their defaults from `settings` (read leniently when None: a bad
    variable is reported when the command starts)."""
    if settings is None:
        from steerable_bridge.commands.settings import AgentSettings

        settings = AgentSettings.lenient()
    parser.add_argument(
        "--model-deadline",
        default=seconds_text(settings.model_deadline),
        metavar="SECONDS",
        help="longest one model call may take, connect to last byte, retries included"
        " (default: $STEERABLE_MODEL_DEADLINE or 300)",
    )
    parser.add_argument(
        "--model-idle-timeout",
        default=seconds_text(settings.model_idle_timeout),
        metavar="SECONDS",
        help="longest wait for the model's next token; keep-alives and empty chunks do not"
        " count (default: $STEERABLE_MODEL_IDLE_TIMEOUT or 120)",
    )


def seconds_text(seconds: float) -> str:
    """`300.0` → "300", `0.5` → "0.5": an option's default as the variable would spell it."""
    return str(int(seconds)) if seconds.is_integer() else repr(seconds)


def deadlines_from_args(args: argparse.Namespace) -> CallDeadlines:
    """The deadlines the options ask for; ValueError on a bad value."""
    from steerable_bridge.adapters.llm.deadlines import CallDeadlines

    default = CallDeadlines()
    call = getattr(args, "model_deadline", None)
    idle = getattr(args, "model_idle_timeout", None)
    return CallDeadlines(
        call_s=default.call_s
        if call is None
        else positive_seconds(call, "--model-deadline", "STEERABLE_MODEL_DEADLINE"),
        idle_s=default.idle_s
        if idle is None
        else positive_seconds(idle, "--model-idle-timeout", "STEERABLE_MODEL_IDLE_TIMEOUT"),
    )
