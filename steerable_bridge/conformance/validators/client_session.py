"""The client validator's state: settings, one session's bookkeeping, and the check log.

`ValidatorSettings` holds the deadlines (how long to wait for the person, for a client
request, for a ping); `ValidatorSession` is one session the client opened (cwd, current mode
and config value, every update sent — replayed verbatim on `session/load` — and the cancel
event of the running prompt); `CheckLog` keeps verdicts in the order first graded. The modes
and the one config option the validator offers live here too, so both the agent methods and
the walk-through agree on them, and so does `WalkSteps`, the walk-through as its step
modules (`client_cancel.py`, `client_resources.py`) see it. Nothing here talks to the client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
from acp.schema import SessionConfigOptionSelect, SessionConfigSelectOption

from steerable_bridge.conformance.validators.report import Check, CheckStatus

if TYPE_CHECKING:
    from acp.interfaces import Client
    from acp.schema import (
        ClientCapabilities,
        PermissionOption,
        RequestPermissionResponse,
        ToolCallUpdate,
    )

__all__ = [
    "CONFIG_ID",
    "CONFIG_VALUES",
    "MODES",
    "PING_METHOD",
    "SCRATCH_LINES",
    "CheckLog",
    "ValidatorSession",
    "ValidatorSettings",
    "WalkSteps",
    "config_options",
]

T = TypeVar("T")

PING_METHOD = "steerable/validator_ping"
"""Extension request used as a liveness probe; sent on the wire as `_steerable/validator_ping`."""
MODES = (("validate", "Validate"), ("observe", "Observe"))
CONFIG_ID = "validator_depth"
CONFIG_VALUES = (("full", "Full walk-through"), ("quick", "Quick"))
SCRATCH_LINES = "line 1\nline 2\nline 3\nline 4\nline 5\n"


@dataclass(frozen=True, slots=True)
class ValidatorSettings:
    """How long the validator waits for each kind of answer (seconds)."""

    person_timeout: float = 120.0
    cancel_timeout: float = 90.0
    request_timeout: float = 15.0
    probe_timeout: float = 5.0


@dataclass(slots=True)
class ValidatorSession:
    """One session the client opened: its cwd, current mode / config, and what was sent."""

    id: str
    cwd: str
    mode_id: str = MODES[0][0]
    config_value: str = CONFIG_VALUES[0][0]
    history: list[Any] = field(default_factory=list)
    cancelled: anyio.Event = field(default_factory=anyio.Event)
    cancelled_at: float | None = None


class CheckLog:
    """Checks in the order first graded; grading an id again replaces its verdict."""

    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}

    def record(self, check_id: str, status: CheckStatus, evidence: str) -> None:
        self._checks[check_id] = Check(check_id, status, evidence)

    def has(self, check_id: str) -> bool:
        return check_id in self._checks

    @property
    def checks(self) -> tuple[Check, ...]:
        return tuple(self._checks.values())


def config_options(current: str) -> list[SessionConfigOptionSelect | Any]:
    """The one select option the validator offers, so clients can show and set it."""
    return [
        SessionConfigOptionSelect(
            id=CONFIG_ID,
            name="Validation depth",
            type="select",
            current_value=current,
            options=[SessionConfigSelectOption(value=v, name=n) for v, n in CONFIG_VALUES],
        )
    ]


class WalkSteps(Protocol):
    """What a step module reaches on the walk-through (`Walkthrough` in
    `client_walkthrough.py`, which imports the steps; naming it here keeps them from
    importing it back)."""

    conn: Client
    session: ValidatorSession
    caps: ClientCapabilities
    settings: ValidatorSettings
    log: CheckLog
    nonce: str

    async def send(self, update: Any) -> str: ...

    async def say(self, text: str) -> None: ...

    async def request(
        self, what: str, call: Callable[[], Awaitable[T]]
    ) -> tuple[T | None, str]: ...

    async def grade_update(self, check_id: str, update: Any, what: str) -> None: ...

    def path(self, name: str) -> str: ...

    def permission_options(self, tag: str) -> list[PermissionOption]: ...

    async def ask(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> tuple[RequestPermissionResponse | None, str]: ...
