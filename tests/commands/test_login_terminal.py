"""`steerable-bridge login` in a terminal (what an ACP client's terminal auth runs): it asks
for the provider, base URL and key, does not echo the key, and saves what was typed."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from steerable_bridge.commands.credentials import StoredKey, load_credentials

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def read_until(fd: int, wanted: bytes, seen: bytearray, limit_s: float = 60.0) -> None:
    """Read the terminal into `seen` until `wanted` shows up (bounded by `limit_s`)."""
    deadline = time.monotonic() + limit_s
    while wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {wanted!r} on the terminal; it showed {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                chunk = b""
            assert chunk, f"the terminal closed before {wanted!r}; it showed {bytes(seen)!r}"
            seen += chunk


@pytest.mark.parametrize(
    "argv",
    [["login"], ["acp", "login"]],
    ids=["login", "acp-login"],  # the terminal method's args, replacing or appended to `acp`
)
def test_an_interactive_login_hides_the_key_and_saves_the_answers(
    tmp_path: Path, argv: list[str]
) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "steerable_bridge.cli", *argv],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    seen = bytearray()
    try:
        read_until(master, b"Provider [1]: ", seen)
        os.write(master, b"2\n")  # Anthropic
        read_until(master, b"Base URL [https://api.anthropic.com]: ", seen)
        os.write(master, b"\n")  # the default
        read_until(master, b"API key", seen)
        os.write(master, b"sk-ant-typed-secret\n")
        read_until(master, b"Saved anthropic", seen)
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        os.close(master)
    assert b"1. OpenAI-compatible" in seen and b"2. Anthropic" in seen
    assert b"sk-ant-typed-secret" not in seen  # never echoed, nor printed
    path = tmp_path / "steerable-bridge" / "credentials.json"
    assert load_credentials(path) == {
        "anthropic": StoredKey(base_url="", api_key="sk-ant-typed-secret")
    }
