"""Route families: whose sessions a command lists, and where a bridge keeps them by default.

A session names the model route that serves it. Our own runtime's routes (`demo:`,
`openai:`, `anthropic:`, ...) form one family; each bridged agent is a family of its own —
`acp-agent:<name>` (`serve --acp-agent`) and `agui:<host>/<path>` (`acp --agui-url`) — since
a conversation one of them holds cannot go on in another (the far agent keeps its own
context, and our model never saw it). So a bridge left on the default `--storage` gets its
own store beside the default one (`bridge_storage`: `<state>/bridges/<route>/sessions.db`),
and every port lists only its own family (`family_filter`, for `LocalPort(family=...)`),
which keeps the lists apart even when the user points several at one store on purpose.
Pure functions of the options and the environment; imports nothing heavy.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from steerable_bridge.commands.settings import SessionSettings
from steerable_bridge.commands.storage_choice import state_dir

__all__ = ["BRIDGE_PROVIDERS", "bridge_storage", "family_filter"]

BRIDGE_PROVIDERS = ("acp-agent", "agui")
"""The route providers of the two bridges (`transports/acp/bridge/route.py`,
`transports/agui/bridge/endpoint.py`)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _provider(route: str) -> str:
    return route.partition(":")[0]


def family_filter(route: str) -> Callable[[str], bool]:
    """Which routes share `route`'s family: that very route for a bridge, every route
    that is not a bridge's for ours."""
    if _provider(route) in BRIDGE_PROVIDERS:
        return lambda other: other == route
    return lambda other: _provider(other) not in BRIDGE_PROVIDERS


def bridge_storage(spec: str, route: str) -> str:
    """The store of a bridge serving `route`: its own file under the state folder when
    `spec` is the built-in default (no `--storage`, no `$STEERABLE_STORAGE`), else `spec`."""
    builtin = os.path.join(state_dir(), "sessions.db")
    if spec != builtin or SessionSettings.lenient().storage:
        return spec
    folder = _UNSAFE.sub("_", route).strip("._") or "bridge"
    return os.path.join(state_dir(), "bridges", folder, "sessions.db")
