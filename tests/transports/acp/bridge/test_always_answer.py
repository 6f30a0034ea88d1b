"""A client's "always" answer (AG-UI `resume[].payload.always`) reaching a bridged ACP agent:
the bridge picks the agent's own "always" option when it has one, else its "once" option,
and logs the outcome of the option it sent."""

from __future__ import annotations

from steerable_bridge.runtime.values import PermissionOption
from steerable_bridge.transports.acp.bridge.turn import _outcome, _pick

FULL = (
    PermissionOption(option_id="a1", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="a2", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="r1", name="Reject", kind="reject_once"),
    PermissionOption(option_id="r2", name="Always reject", kind="reject_always"),
)
ONCE_ONLY = (FULL[0], FULL[2])


def test_always_picks_the_agents_always_option_and_logs_it() -> None:
    for allow, option, outcome in ((True, "a2", "allow_always"), (False, "r2", "reject_always")):
        choice = _pick(FULL, allow=allow, always=True)
        assert choice == option
        assert _outcome(FULL, choice, allow=allow) == outcome


def test_once_and_agents_without_always_options_count_once() -> None:
    assert _pick(FULL, allow=True) == "a1" and _pick(FULL, allow=False) == "r1"
    choice = _pick(ONCE_ONLY, allow=True, always=True)
    assert choice == "a1" and _outcome(ONCE_ONLY, choice, allow=True) == "allow_once"
    assert _outcome(FULL, None, allow=False) == "reject_once"
