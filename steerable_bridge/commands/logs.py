"""Logging for the long-running commands (`acp`, `serve`): level, file, and text or JSON lines.

`add_log_options(parser, default_level)` adds `--log-level` (`STEERABLE_LOG`), `--log-file`
(`STEERABLE_LOG_FILE`) and `--log-format text|json` (`STEERABLE_LOG_FORMAT`), the variables
read by `settings.LogSettings`;
`configure_logging(args)` installs one handler on stderr (never stdout: ACP owns it) and one
on the file when given. Every record carries the session, run and trace id of the turn that
wrote it (`runtime.turns.logcontext.ContextFilter`); the text format shows them in brackets when
set, the JSON format (one object per line, for log shippers) always has the three keys.
Exceptions keep their traceback: as text under the line, or in the JSON `exc_info` key.
Control characters in a record (a file name, a model's text) are escaped (`terminal.py`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime

from steerable_bridge.commands.terminal import json_printable, printable
from steerable_bridge.runtime.turns.logcontext import ContextFilter

__all__ = ["JsonFormatter", "TextFormatter", "add_log_options", "configure_logging"]

_IDS = ("session_id", "run_id", "trace_id")


def add_log_options(parser: argparse.ArgumentParser, *, default_level: str = "warning") -> None:
    from steerable_bridge.commands.settings import LogSettings

    settings = LogSettings.lenient()  # the defaults; a bad value is reported at start-up
    parser.add_argument(
        "--log-level",
        default=settings.level or default_level,
        type=str.lower,
        choices=("debug", "info", "warning", "error"),
        help=f"how much to log on stderr (default: $STEERABLE_LOG or {default_level})",
    )
    parser.add_argument(
        "--log-file",
        default=settings.file,
        help="also write the log to this file (default: $STEERABLE_LOG_FILE)",
    )
    parser.add_argument(
        "--log-format",
        default=settings.format,
        type=str.lower,
        choices=("text", "json"),
        help="text lines for people, or one JSON object per line for machines"
        " (default: $STEERABLE_LOG_FORMAT or text)",
    )


class TextFormatter(logging.Formatter):
    """`time LEVEL logger [session run trace]: message`, the ids only when known."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(ids)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        ids = [f"{name[:-3]}={value}" for name in _IDS if (value := getattr(record, name, None))]
        record.ids = f" [{' '.join(ids)}]" if ids else ""
        return printable(super().format(record))  # newlines stay: tracebacks need them


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, message, the ids, exc_info."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _IDS:
            data[name] = getattr(record, name, None)
        if record.exc_info:
            data["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exc_info"] = record.exc_text
        if record.stack_info:
            data["stack_info"] = self.formatStack(record.stack_info)
        return json_printable(json.dumps(data, ensure_ascii=False, default=str))


def configure_logging(args: argparse.Namespace) -> None:
    """Install the handlers `--log-level`, `--log-file` and `--log-format` ask for."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log_file:
        from steerable_bridge.adapters.tools.agent_files import AGENT_FILES

        handlers.append(logging.FileHandler(args.log_file))
        AGENT_FILES.keep_file(args.log_file, "log file")  # the model may not rewrite it
    formatter = JsonFormatter() if args.log_format == "json" else TextFormatter()
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(ContextFilter())
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.WARNING),
        handlers=handlers,
        force=True,
    )
