"""The `steerable-bridge` command: a thin dispatcher over `steerable_bridge/commands/`.

Each subcommand lives in its own module with `register(subparsers)`; modules import their
heavy dependencies inside the command function, so `steerable-bridge acp` starts without
loading the AG-UI server and vice versa. Configuration errors print one line with the
remedy and exit 2; a bare `steerable-bridge` prints the help and exits 0. The commands
that read settings from the environment (`SETTINGS_COMMANDS`) get them validated once,
before they run (`args.settings`, `commands/settings.py`): every bad variable is one line.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from steerable_bridge import __version__


def version() -> str:
    """The installed distribution's version (its metadata), else the package's own."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("steerable-bridge")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return __version__


COMMANDS: tuple[str, ...] = (
    "run",
    "acp",
    "login",
    "serve",
    "sessions",
    "schema",
    "check",
    "conformance",
    "completion",
)
"""Modules under steerable_bridge.commands, in the order `--help` lists them."""

SETTINGS_COMMANDS = frozenset({"run", "acp", "serve", "sessions", "login"})
"""The commands that read the environment's settings; the others (schema, check, ...) run
whatever it holds."""


class _ShowVersion(argparse.Action):
    """`--version`, reading the metadata only when asked (it costs the cold start ms)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"steerable-bridge {version()}")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `only` (a command name) just that command is loaded, for fast starts."""
    parser = argparse.ArgumentParser(
        prog="steerable-bridge",
        description="One agent runtime served as an ACP agent (stdio) and an AG-UI endpoint (SSE).",
    )
    parser.add_argument("--version", action=_ShowVersion, help="print the version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in (only,) if only in COMMANDS else COMMANDS:
        module = importlib.import_module(f"steerable_bridge.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from steerable_bridge.commands.errors import ConfigError

    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(arguments[0] if arguments else None)
    if not arguments:  # a bare `steerable-bridge`: what it can do, not a usage error
        parser.print_help()
        return 0
    args = parser.parse_args(arguments)
    try:
        if arguments[0] in SETTINGS_COMMANDS:  # the command's name (`args.command` may be
            # a command's own option: `check acp -- COMMAND...`)
            from steerable_bridge.commands.settings import load_settings

            args.settings = load_settings()
        code: int = args.func(args)
    except ConfigError as error:  # a SettingsError too: one line per bad variable
        from steerable_bridge.commands.terminal import printable

        for line in str(error).splitlines() or [""]:  # one line per bad value
            print(f"steerable-bridge: {printable(line, layout=False)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `steerable-bridge ... | head`: the reader has what it wanted
        from steerable_bridge.commands.pipes import CLOSED_PIPE_EXIT, silence_output

        silence_output()
        return CLOSED_PIPE_EXIT
    return code


if __name__ == "__main__":
    sys.exit(main())
