"""Command shapes: which commands an "always" answer may cover, and which must always be asked."""

from __future__ import annotations

import pytest

from steerable_bridge.runtime.tool_calls.approvals import approval_key, approval_options
from steerable_bridge.runtime.tool_calls.command_shape import command_shape

SHAPED = [
    ("git status", "git status"),
    ("  git status --porcelain", "git status"),
    ("git --no-pager log --oneline -5", "git log"),
    ("git -P diff HEAD~1 -- src/app.py", "git diff"),
    ("git diff --stat", "git diff"),
    ("git log -p --pretty=oneline", "git log"),
    ("git show HEAD", "git show"),
    ("git grep -n TODO", "git grep"),
    ("git branch -a", "git branch"),
    ("pytest", "pytest"),
    ("pytest -q -x tests/runtime/turns/test_loop.py", "pytest"),
    ("pytest -k 'loop and not slow' --maxfail=2", "pytest"),
    ("python -m pytest -q", "python -m pytest"),
    ("python3 -m pytest tests", "python -m pytest"),
    ("python3.12 -m mypy steerable_bridge", "python -m mypy"),
    ("python -m unittest discover", "python -m unittest"),
    ("uv run pytest -q", "uv run pytest"),
    ("uv run ruff check .", "uv run ruff check"),
    ("uv run python -m pytest", "uv run python -m pytest"),
    ("ruff format --check .", "ruff format"),
    ("mypy --strict src", "mypy"),
    ("cargo test --release", "cargo test"),
    ("go test ./...", "go test"),
    ("npm test", "npm test"),
    ("make", "make"),
    ("make -j4 test", "make"),
    ("find . -name '*.py' -type f", None),  # a glob character, even quoted: asked
    ("find src -type f -newer README.md", "find"),
    ("ls -la src", "ls"),
    ("cat README.md", "cat"),
    ("head -n 20 src/app.py", "head"),
    ("wc -l src/app.py", "wc"),
    ("echo one", "echo"),
    ("grep -rn main src", "grep"),
    ("rg -n --pre-glob x main", "rg"),
    ("'git' status", "git status"),
]

ASKED = [
    # the red-team run's examples
    "git -c alias.x='!touch PWNED' x",
    "git -c core.pager='touch PWNED' log",
    "git x",
    "python -c 'import os; os.system(\"touch PWNED\")'",
    "python -c print",
    "python3 -c print",
    "python script.py",
    "env touch PWNED",
    "env FOO=1 git status",
    "find . -exec touch PWNED +",
    "find . -execdir touch PWNED +",
    "find . -ok touch PWNED",
    "find . -delete",
    "find . -fprint out",
    "pytest -p pwned_plugin",
    "pytest -pno:cacheprovider",
    "pytest -vp pwned",
    "pytest -c other.ini",
    "pytest --config-file=other.ini",
    "pytest -o addopts=-ppwned",
    "pytest --override-ini=addopts=-ppwned",
    "pytest --pdbcls=pwned:Debugger",
    "python -m pytest -p pwned",
    "uv run pytest -p pwned",
    # wrappers and shells
    "xargs touch",
    "sh -c 'touch PWNED'",
    "bash -c id",
    "zsh -c id",
    "nice touch PWNED",
    "nohup touch PWNED",
    "timeout 5 touch PWNED",
    "sudo touch PWNED",
    "exec touch PWNED",
    "eval id",
    "command touch PWNED",
    "time touch PWNED",
    "watch id",
    "setsid touch PWNED",
    "stdbuf -oL touch PWNED",
    "ssh host id",
    "npx pwned",
    # interpreters with inline code
    "node -e 'require(\"fs\")'",
    "ruby -e 'system(1)'",
    "perl -e 'system 1'",
    "php -r 'system(1);'",
    "awk 'BEGIN{system(1)}'",
    "sed -n 1p README.md",
    "uv run python -c print",
    "python -m pip install pwned",
    "python -X dev -m pytest",
    # shell metacharacters
    "git status; touch PWNED",
    "git status && touch PWNED",
    "git status || touch PWNED",
    "git status | sh",
    "git status & touch PWNED",
    "echo $(touch PWNED)",
    "echo `touch PWNED`",
    "echo ${HOME}",
    "echo $HOME",
    "echo hi > .git/hooks/pre-commit",
    "cat < /etc/passwd",
    "git status\ntouch PWNED",
    "git status\rtouch PWNED",
    "ls *",
    "ls ~",
    "echo a\\;b",
    "git status # a comment",
    "(touch PWNED)",
    "{ touch PWNED; }",
    # options that run or write what they are told
    "git diff --output=.git/hooks/pre-commit",
    "git diff --ext-diff",
    "git grep -O touch x",
    "git grep --open-files-in-pager=touch x",
    "git --exec-path=. status",
    "git -C /elsewhere status",
    "git --git-dir=/elsewhere/.git status",
    "git branch --edit-description",
    "git log --exe",  # an abbreviation of an --exec* option
    "git show --config-env=x=y",
    "fd -x touch",
    "fd -X touch",
    "fd --exec touch",
    "rg --pre ./pwn main",
    "sort --compress-program=./pwn big.txt",
    "make SHELL=./pwn",
    "make CC=./pwn all",
    "make --eval='x:;touch PWNED'",
    "make -f other.mk",
    "cargo -Zunstable-options build",
    "cargo build --config 'target.x.runner=\"pwn\"'",
    "go test -exec ./pwn ./...",
    "go build -toolexec=./pwn",
    "go vet -vettool=./pwn",
    "mypy --config-file pwn.ini",
    # programs nobody reviewed, paths, assignments, bad input
    "rm -rf build",
    "curl https://example.com",
    "docker run alpine id",
    "./pwn",
    "/usr/bin/git status",
    "bin/pwn",
    "FOO=1 make",
    "g\u0456t status",  # a Cyrillic i
    "git",
    "cargo",
    "uv run --with pwned pytest",
    "uv sync",
    "echo 'unclosed",
    "",
    "   ",
]


@pytest.mark.parametrize(("command", "shape"), SHAPED)
def test_reviewed_commands_have_a_shape(command: str, shape: str | None) -> None:
    assert command_shape(command).shape == shape


@pytest.mark.parametrize("command", ASKED)
def test_commands_that_can_smuggle_another_are_always_asked(command: str) -> None:
    found = command_shape(command)
    assert found.shape is None
    assert found.reason  # the reason is there to be shown
    assert approval_key("run_command", {"command": command}) is None
    kinds = {o.kind for o in approval_options("run_command", None)}
    assert "allow_always" not in kinds and "reject_always" not in kinds


def test_always_options_name_what_they_cover() -> None:
    key = approval_key("run_command", {"command": "git diff --stat"})
    assert key == "run_command:git diff"
    names = {o.option_id: o.name for o in approval_options("run_command", key)}
    assert names["allow_always"] == "Always allow `git diff` here"
    assert names["allow_once"] == "Allow once"
    assert {o.option_id for o in approval_options("write_file", "write_file")} >= {
        "allow_always",
        "reject_always",
    }
