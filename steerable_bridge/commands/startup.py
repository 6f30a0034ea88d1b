"""The one start-up line `run`, `serve` and `acp` print on stderr: what this process uses.

`startup_line(model, storage, workspace)` names the model route, the session store and the
workspace the file tools work in (or that there are none), so a person sees at once which
settings their flags and environment produced. A password in a storage URL is never shown.
It goes to stderr only: `acp`'s stdout is the protocol. `announce(line, log_format)` writes
it there — as one JSON log object when logs are JSON lines (`--log-format json`), so a log
shipper reading stderr sees nothing else — whatever the log level.
"""

from __future__ import annotations

import logging
import sys
from urllib.parse import urlsplit, urlunsplit

__all__ = ["announce", "redacted_storage", "startup_line"]


def redacted_storage(spec: str) -> str:
    """`spec` with any password in a URL replaced by `***`."""
    if "://" not in spec:
        return spec
    try:
        parts = urlsplit(spec)
        password = parts.password
    except ValueError:
        return spec.split("://", 1)[0] + "://***"
    if password is None:
        return spec
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def startup_line(model: str, storage: str, workspace: str | None) -> str:
    """E.g. `steerable-bridge: model demo:default, storage /x/sessions.db, workspace /w`."""
    where = workspace if workspace is not None else "none (no file tools)"
    return (
        f"steerable-bridge: model {model}, storage {redacted_storage(storage)}, workspace {where}"
    )


def announce(line: str, log_format: str = "text") -> None:
    """Write the start-up `line` to stderr, as a JSON log object for `--log-format json`."""
    if log_format == "json":
        from steerable_bridge.commands.logs import JsonFormatter

        record = logging.makeLogRecord({"name": __name__, "levelname": "INFO", "msg": line})
        line = JsonFormatter().format(record)
    print(line, file=sys.stderr, flush=True)
