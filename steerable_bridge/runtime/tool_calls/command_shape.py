"""Command shapes: what an "always allow" answer about a shell command may cover.

`command_shape(command)` answers with the shape a remembered answer is kept under —
`git diff`, `pytest`, `uv run pytest` — or with None and the reason, when the command can
smuggle another command in and must be asked about every time (the "always" options are
then not offered). A shape is a reviewed program plus, where the program has subcommands,
a reviewed subcommand; every later argument is checked against the options that program
(or any program) uses to run code of the caller's choosing. The table:

    the whole command           any of  ; & | < > ` $ ( ) { } [ ] * ? # \\ newline, or a
                                word starting with ~ -> ask (chaining, redirection,
                                substitution, expansion, globs)
    first word                  VAR=value, a path (./x, /usr/bin/x), not reviewed -> ask
    wrappers, shells            env xargs sh bash zsh nice nohup timeout sudo doas su
                                exec eval command time watch strace setsid ... -> ask
    interpreters                python* node ruby perl php lua awk sed ... -> ask,
                                except `python -m pytest|mypy|ruff|unittest` (shaped
                                like the tool itself: `python -m pytest`)
    git                         `git SUB` for SUB in status diff log show blame ls-files
                                ls-tree rev-parse describe shortlog grep branch; only
                                --no-pager / -P before SUB (no -c, -C, --exec-path,
                                aliases); no --output, --ext-diff, -O / --open-files-in-pager
    pytest                      no -p (plugins), -c / --config-file, -o / --override-ini,
                                --pdbcls
    uv                          `uv run CMD` (no uv options) shaped `uv run <CMD's shape>`
    cargo / go / npm / ruff     reviewed subcommands (cargo build check test clippy fmt
                                tree metadata; go build test vet list; npm test ls
                                outdated; ruff check format); no -Z, -exec, -toolexec,
                                -vettool
    make                        no VAR=value (SHELL=...), --eval, -f
    find / fd / rg / sort       no -exec -execdir -ok -okdir -delete -fprint* -fls /
                                -x -X / --pre / --compress-program
    plain tools                 ls cat head tail wc echo grep diff jq tree stat mkdir ...
    every reviewed program      no --exec*, --config*, --eval, --command, --rcfile,
                                --init-file, --plugin*, --load-plugins, --require,
                                --pager, --editor, --shell, --output*, nor a unique
                                abbreviation of one (`--exe`)

What "always allow `git diff`" then means: `git diff` with any arguments that pass these
checks runs without a question in this project; `git -c ... diff`, `git diff --output=x`
or `git log` are still asked about. Project files the programs read themselves (git
hooks and config, conftest.py, a Makefile) are the project's code; the sandbox confines
it. Pure: no I/O, nothing but the text.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

__all__ = ["CommandShape", "command_shape"]

_SPECIAL = re.compile(r"[;&|<>`$(){}\[\]*?#\\\n\r]")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


WRAPPERS = _words(
    "env xargs sh bash zsh dash ksh fish csh tcsh busybox nice nohup timeout sudo doas su"
    " exec eval command builtin time watch strace ltrace gdb setsid unshare nsenter chroot"
    " flock ionice taskset chrt stdbuf script parallel ssh npx bunx pnpx"
)
"""Programs whose job is to run another command (shown for the reason only)."""

INTERPRETERS = _words(
    "python python2 python3 pypy pypy3 node deno bun ruby perl php lua luajit tclsh wish"
    " Rscript julia osascript awk gawk mawk nawk sed ed vim vi nvim emacs"
)
"""Programs that run code given on the command line or in a file the model may write."""

_PYTHON = re.compile(r"^python(3(\.\d+)?)?$")

_GENERIC_LONG = (
    "--exec*",
    "--config*",
    "--eval",
    "--command",
    "--rcfile",
    "--init-file",
    "--plugin*",
    "--load-plugins",
    "--require",
    "--pager",
    "--editor",
    "--shell",
    "--output*",
)
"""Long options no reviewed program may take (`*`: and longer names beginning so)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    subcommands: frozenset[str] | None = None
    """Reviewed subcommands (None: the program takes no subcommand)."""
    short: str = ""
    """Banned short option letters, also inside clusters (`-vp`)."""
    long: tuple[str, ...] = ()
    """Banned long options, as in `_GENERIC_LONG`."""
    words: tuple[str, ...] = ()
    """Banned words by prefix (`find -exec`, `go test -toolexec=...`)."""
    no_assignments: bool = False
    """Refuse `NAME=value` arguments (make's variable overrides)."""


_PLAIN = _Rule()

_RULES: dict[str, _Rule] = {
    **{
        name: _PLAIN
        for name in _words(
            "ls cat head tail wc echo printf pwd date true false grep egrep fgrep tree stat"
            " file du df diff cmp uniq cut tr nl tac column comm paste basename dirname"
            " realpath readlink which whoami uname id hostname jq md5sum sha1sum sha256sum"
            " mkdir mypy tsc black isort flake8"
        )
    },
    "git": _Rule(
        subcommands=_words(
            "status diff log show blame ls-files ls-tree rev-parse describe shortlog grep branch"
        ),
        short="O",
        long=(
            "--ext-diff",
            "--open-files-in-pager",
            "--upload-pack",
            "--receive-pack",
            "--edit-description",
        ),
    ),
    "pytest": _Rule(short="pco", long=("--override-ini", "--pdbcls")),
    "ruff": _Rule(subcommands=_words("check format")),
    "cargo": _Rule(subcommands=_words("build check test clippy fmt tree metadata"), short="Z"),
    "go": _Rule(
        subcommands=_words("build test vet list"),
        words=("-exec", "-toolexec", "--toolexec", "-vettool", "--vettool"),
    ),
    "npm": _Rule(subcommands=_words("test ls outdated")),
    "make": _Rule(short="fE", long=("--file", "--makefile", "--eval"), no_assignments=True),
    "find": _Rule(
        words=("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fls", "-fprintf")
    ),
    "fd": _Rule(short="xX"),
    "rg": _Rule(long=("--pre",)),
    "sort": _Rule(long=("--compress-program",)),
}

_PYTHON_MODULES = frozenset({"pytest", "mypy", "ruff", "unittest"})
_GIT_GLOBAL = frozenset({"--no-pager", "-P", "--no-optional-locks"})


@dataclass(frozen=True, slots=True)
class CommandShape:
    """What an "always" answer about a command covers; `shape` None = ask every time."""

    shape: str | None
    reason: str = field(default="")
    """Why there is no shape (empty when there is one)."""


def _ask(reason: str) -> CommandShape:
    return CommandShape(None, reason)


def command_shape(command: str) -> CommandShape:
    """The shape an "always" answer about `command` is kept under (see the module table)."""
    found = _SPECIAL.search(command)
    if found is not None:
        return _ask(
            f"it contains {found.group()!r} (chaining, redirection, substitution or expansion)"
        )
    try:
        words = shlex.split(command)
    except ValueError:
        return _ask("its quoting is unbalanced")
    if not words:
        return _ask("it is empty")
    if any(word.startswith("~") or "=~" in word or ":~" in word for word in words):
        return _ask("it contains a ~ the shell would expand")
    return _shape(words)


def _shape(words: list[str]) -> CommandShape:
    program = words[0]
    if "=" in program:
        return _ask("it starts by setting a variable")
    if "/" in program:
        return _ask("it runs a program by path, which may be a file the model wrote")
    if program in WRAPPERS:
        return _ask(f"{program} runs other commands")
    if program == "uv":
        if len(words) > 2 and words[1] == "run" and not words[2].startswith("-"):
            inner = _shape(words[2:])
            return CommandShape(f"uv run {inner.shape}") if inner.shape else inner
        return _ask("only `uv run COMMAND` is reviewed for uv")
    if program in INTERPRETERS or _PYTHON.match(program):
        if _PYTHON.match(program) and len(words) > 2 and words[1] == "-m":
            module = words[2]
            if module in _PYTHON_MODULES:
                rest = words[3:]
                inner = (
                    _shape([module, *rest]) if module in _RULES else _checked(module, _PLAIN, rest)
                )
                return CommandShape(f"python -m {inner.shape}") if inner.shape else inner
        return _ask(f"{program} runs code given to it")
    rule = _RULES.get(program)
    if rule is None:
        return _ask(f"{program} is not a reviewed program")
    rest = words[1:]
    if program == "git":
        while rest and rest[0] in _GIT_GLOBAL:
            rest = rest[1:]
        if rest and rest[0].startswith("-"):
            return _ask(f"git option {rest[0]} before the subcommand can change what git runs")
    if rule.subcommands is None:
        return _checked(program, rule, rest)
    if not rest or rest[0] not in rule.subcommands:
        sub = rest[0] if rest else "(none)"
        return _ask(f"{program} {sub} is not a reviewed subcommand (it may be an alias)")
    return _checked(f"{program} {rest[0]}", rule, rest[1:])


def _checked(shape: str, rule: _Rule, args: list[str]) -> CommandShape:
    for arg in args:
        problem = _banned(arg, rule)
        if problem is not None:
            return _ask(f"{shape} {problem} can run or write what it is told")
    return CommandShape(shape)


def _banned(arg: str, rule: _Rule) -> str | None:
    if rule.no_assignments and "=" in arg and not arg.startswith("-"):
        return f"{arg.split('=')[0]}=..."
    if any(arg.startswith(word) for word in rule.words):
        return arg
    if arg.startswith("--") and len(arg) > 2:
        name = arg.split("=", 1)[0]
        for banned in (*_GENERIC_LONG, *rule.long):
            family = banned.endswith("*")
            full = banned.rstrip("*")
            if name == full or (family and name.startswith(full)):
                return name
            if len(name) >= 4 and full.startswith(name):  # a unique abbreviation
                return name
        return None
    if arg.startswith("-") and len(arg) > 1 and rule.short:
        cluster = arg[1:]
        if any(letter in cluster for letter in rule.short):
            return arg
    return None
