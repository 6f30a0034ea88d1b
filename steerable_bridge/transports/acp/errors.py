"""Stable JSON-RPC errors of the ACP agent: one constructor per failure, each naming the remedy.

Every error the ACP transport returns is an `acp.RequestError` built here, so codes and
messages stay stable for clients and tests. Numeric codes follow JSON-RPC (-32602 invalid
params, -32601 method not found) and ACP (-32000 authentication required, -32002 resource
not found); failures specific to this agent use the server range -32010..-32019. `data`
always carries `{"code": "<stable string>"}` (plus details), which is what a client should
switch on. Nothing here does I/O.
"""

from __future__ import annotations

from typing import Any

from acp import RequestError

__all__ = [
    "AUTH_REQUIRED",
    "INVALID_PARAMS",
    "METHOD_NOT_FOUND",
    "NOT_FOUND",
    "RUN_FAILED",
    "SESSION_BUSY",
    "STARTUP_FAILED",
    "STORE_FAILED",
    "UNSUPPORTED",
    "auth_required",
    "invalid_params",
    "not_supported",
    "route_failed",
    "run_failed",
    "session_busy",
    "session_not_found",
    "startup_failed",
    "store_failed",
]

INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
AUTH_REQUIRED = -32000
NOT_FOUND = -32002
SESSION_BUSY = -32010
RUN_FAILED = -32011
UNSUPPORTED = -32012
STARTUP_FAILED = -32013
STORE_FAILED = -32014


def _error(code: int, stable: str, message: str, **details: Any) -> RequestError:
    return RequestError(code, message, {"code": stable, **details})


def invalid_params(message: str, *, stable: str = "invalid_params", **details: Any) -> RequestError:
    """Bad parameters: the message says which one and what a valid value looks like."""
    return _error(INVALID_PARAMS, stable, message, **details)


def session_not_found(session_id: str) -> RequestError:
    return _error(
        NOT_FOUND,
        "session_not_found",
        f"session {session_id} is not known to this agent; call session/list for valid ids"
        " or session/new to start one",
        sessionId=session_id,
    )


def session_busy(session_id: str, busy: Exception | None = None) -> RequestError:
    """The session runs a turn already: here (send session/cancel) or in another process
    that owns it (`busy` is the runtime's SessionOwned, whose message names the owner)."""
    if busy is not None and getattr(busy, "code", None) == "session_owned":
        return _error(SESSION_BUSY, "session_owned", str(busy), sessionId=session_id)
    return _error(
        SESSION_BUSY,
        "session_busy",
        f"session {session_id} is already running a prompt; wait for its response or send"
        " session/cancel first",
        sessionId=session_id,
    )


def auth_required(variable: str, route: str) -> RequestError:
    return _error(
        AUTH_REQUIRED,
        "auth_required",
        f"the model {route} needs a key ({variable}); run `steerable-bridge login` (the"
        f" editor's terminal sign-in) and retry, or set {variable} in the agent's environment"
        " (the editor's agent settings) and restart the agent, or pick a model that needs no"
        " key (--model demo:default)",
        variable=variable,
        route=route,
    )


def route_failed(code: str, message: str) -> RequestError:
    """The session's model route cannot be used (unknown provider, refused model)."""
    return _error(RUN_FAILED, code, message)


def run_failed(
    code: str,
    message: str,
    run_id: str,
    event: dict[str, Any] | None = None,
    *,
    trace_id: str | None = None,
) -> RequestError:
    """A turn that failed: the provider's or loop's stable code and its remedy.

    `event` is the run's `run_failed` LoopEvent as JSON (`data.event`, for decoders);
    `trace_id` the trace the run was recorded under (`data.traceId`).
    """
    extra: dict[str, Any] = {"runId": run_id}
    if event is not None:
        extra["event"] = event
    if trace_id is not None:
        extra["traceId"] = trace_id
    return _error(RUN_FAILED, code, message, **extra)


def not_supported(method: str, message: str) -> RequestError:
    """A method this agent answers deliberately with a refusal."""
    return _error(UNSUPPORTED, "not_supported", message, method=method)


def startup_failed(message: str) -> RequestError:
    """The agent could not be built (a configuration problem found after `initialize`)."""
    return _error(STARTUP_FAILED, "startup_failed", f"steerable-bridge could not start: {message}")


def store_failed(code: str, message: str) -> RequestError:
    """The session store refused (`storage_full` when its disk is full): code and remedy."""
    return _error(STORE_FAILED, code, message)
