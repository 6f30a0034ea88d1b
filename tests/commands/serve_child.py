"""`steerable-bridge serve` as a child process for end-to-end tests: started on 127.0.0.1,
port 0, with the options, store and environment a test gives; `started()` yields its base
URL once `/health` answers 200, and stops it after. `run_cli()` runs any other command to
its end (`sessions list`, a refused start), and `frames()` reads an AG-UI reply's events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import httpx

CLI = [sys.executable, "-m", "steerable_bridge.cli"]
COMMAND = [*CLI, "serve"]


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without STEERABLE_* and OTEL_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEERABLE_", "OTEL_"))}
    return {**env, "STEERABLE_DEMO_PACE_MS": "0", **extra}


@contextmanager
def started(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    storage: str = "memory",
    **popen: Any,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Run `serve --port 0 --storage STORAGE ARGS`; yields (base URL, process). Its stderr
    is dropped unless `popen` says otherwise (`stderr=subprocess.PIPE` to read the logs)."""
    popen.setdefault("stderr", subprocess.DEVNULL)
    process = subprocess.Popen(
        [*COMMAND, "--port", "0", "--storage", storage, *args],
        stdout=subprocess.PIPE,
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
            for _ in range(400):  # bound before the line is printed; serving a moment later
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        yield base, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """`steerable-bridge ARGS` run to its end (within 60 s), its output captured as text."""
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else clean_env(),
        timeout=60,
        check=check,
    )


def frames(text: str) -> list[dict[str, Any]]:
    """The events of an AG-UI reply body, in order."""
    blocks = (b.split("\n", 1)[-1] if b.startswith("id: ") else b for b in text.split("\n\n"))
    return [json.loads(b[6:]) for b in blocks if b.startswith("data: ")]
