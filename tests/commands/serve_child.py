"""`steerable-bridge serve` as a child process for end-to-end tests: started on 127.0.0.1,
port 0, with the options and environment a test gives; `started()` yields its base URL once
`/health` answers, and stops it after."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import httpx

COMMAND = [sys.executable, "-m", "steerable_bridge.cli", "serve"]


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without STEERABLE_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
    return {**env, "STEERABLE_DEMO_PACE_MS": "0", **extra}


@contextmanager
def started(
    args: Sequence[str], env: Mapping[str, str] | None = None, **popen: Any
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Run `serve --port 0 --storage memory ARGS`; yields (base URL, process)."""
    process = subprocess.Popen(
        [*COMMAND, "--port", "0", "--storage", "memory", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(env) if env is not None else clean_env(),
        text=True,
        **popen,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("steerable-bridge: AG-UI endpoint POST http://"), first
        base = first.split()[-1].removesuffix("/agent")
        with httpx.Client(base_url=base, timeout=5) as client:
            for _ in range(200):  # bound before the line is printed, listening a moment later
                try:
                    client.get("/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
        yield base, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
