"""A person at a terminal, for tests: `steerable-bridge` started on a pseudo-terminal.

`AtTerminal.start(argv, env)` runs the command in a new session whose controlling terminal
is a fresh pty (as a shell's foreground job has), with stdout and stderr captured apart;
`read_until(needle)` reads what the command wrote to the terminal until `needle` appears
(bounded), `type(text)` types into it (`"\\x03"` is Ctrl-C), `finish()` waits for the exit.
`detached(argv, env)` runs it with no terminal at all (a pipe, cron, CI).
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import sys
import termios
from dataclasses import dataclass

COMMAND = [sys.executable, "-m", "steerable_bridge.cli"]


def _take_terminal() -> None:  # runs in the child, after setsid, with stdin = the pty
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@dataclass
class AtTerminal:
    process: subprocess.Popen[str]
    leader: int
    follower: int
    screen: str = ""

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str], *, typed_ahead: str = "") -> AtTerminal:
        """Start `steerable-bridge argv`; `typed_ahead` is already typed when it starts."""
        leader, follower = pty.openpty()
        os.write(leader, typed_ahead.encode())
        process = subprocess.Popen(
            [*COMMAND, *argv], stdin=follower, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
            preexec_fn=_take_terminal,
        )  # fmt: skip
        return cls(process, leader, follower)

    def read_until(self, needle: str, timeout: float = 20.0) -> str:
        """The terminal's text so far once it holds `needle`; AssertionError on timeout."""
        while needle not in self.screen:
            ready, _, _ = select.select([self.leader], [], [], timeout)
            assert ready, f"{needle!r} never appeared on the terminal: {self.screen!r}"
            self.screen += os.read(self.leader, 4096).decode(errors="replace")
        return self.screen

    def type(self, text: str) -> None:
        os.write(self.leader, text.encode())

    def finish(self, timeout: float = 20.0) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) once the command has exited."""
        out, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, out, err

    def unread_line(self, timeout: float = 5.0) -> str:
        """The next line waiting on the terminal's input: what nothing else consumed."""
        ready, _, _ = select.select([self.follower], [], [], timeout)
        assert ready, "nothing is waiting on the terminal's input"
        return os.read(self.follower, 4096).decode()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        os.close(self.leader)
        os.close(self.follower)


def detached(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The command run with no controlling terminal and stdin from /dev/null."""
    return subprocess.run(
        [*COMMAND, *argv], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        env=env, timeout=30, check=False, start_new_session=True,
    )  # fmt: skip
