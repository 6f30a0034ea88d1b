"""The environment variables a tool process inherits: this process's, with the secrets taken out.

Commands the model runs (`run_command`) and the stdio MCP servers a session starts must not
see the agent's credentials: a model told to run `env` would otherwise print the provider
key into the transcript. `looks_secret(name)` is the rule — a name ending in `_KEY`,
`_TOKEN`, `_SECRET`, `_PASS`, `_PASSWD`, `_PAT`, `_CREDENTIALS`, or containing `PASSWORD`,
`SECRET`, `TOKEN`, `API_KEY`, `CREDENTIAL` or `PRIVATE_KEY`, plus the agent sockets that
hand out keys (`SSH_AUTH_SOCK`, `GPG_AGENT_INFO`) — and `tool_environ(pass_env)` is this
process's environment without those names, except the ones the user listed with
`--pass-env NAME,...`. `passed_variables(pass_env)` is only the listed ones, for MCP
servers, which start from the MCP SDK's own short list (HOME, PATH, USER, ...) plus the
`env` their configuration gives them. Nothing here logs a value.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = ["looks_secret", "parse_pass_env", "passed_variables", "tool_environ"]

_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASS", "_PASSWD", "_PAT", "_CREDENTIALS")
_INFIXES = ("PASSWORD", "SECRET", "TOKEN", "API_KEY", "APIKEY", "CREDENTIAL", "PRIVATE_KEY")
_NAMED = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KRB5CCNAME"})


def looks_secret(name: str) -> bool:
    """Whether a variable named `name` probably holds a credential (see the module doc)."""
    upper = name.upper()
    return upper in _NAMED or upper.endswith(_SUFFIXES) or any(part in upper for part in _INFIXES)


def parse_pass_env(text: str) -> frozenset[str]:
    """`"A,B , C"` → {"A", "B", "C"}; empty items are ignored."""
    return frozenset(item.strip() for item in text.split(",") if item.strip())


def tool_environ(
    pass_env: Iterable[str] = (), base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`base` (default: this process's environment) minus secret-looking names not listed."""
    allowed = frozenset(pass_env)
    source = os.environ if base is None else base
    return {
        name: value for name, value in source.items() if name in allowed or not looks_secret(name)
    }


def passed_variables(
    pass_env: Iterable[str], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Only the listed variables that are set in `base` (default: this process's)."""
    source = os.environ if base is None else base
    return {name: source[name] for name in pass_env if name in source}
