"""`remote_server`: the real `steerable-bridge acp --listen 127.0.0.1:0` on a scripted model,
started for a test and stopped after it; the endpoint URL is read from its start-up line.
Used by `test_remote.py` and the TypeScript interop test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

WAIT_S = 30.0


@contextmanager
def server(tmp_path: Path, rounds: list[dict[str, Any]], *extra: str) -> Iterator[str]:
    """`steerable-bridge acp --listen` on a scripted model; yields its endpoint URL. Leaving
    sends SIGTERM, and fails if the server is not gone within `WAIT_S`."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rounds": rounds}))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "steerable_bridge.cli",
            "acp",
            "--listen",
            "127.0.0.1:0",
            "--model",
            f"scripted:{script}",
            "--storage",
            "memory",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "STEERABLE_TOKEN": ""},
        text=True,
    )
    try:
        assert process.stdout is not None
        url = None
        for line in process.stdout:  # the start-up line comes before serving
            if "ACP endpoint " in line:
                url = line.split("ACP endpoint ", 1)[1].split()[0]
                break
        assert url is not None, "no start-up line naming the endpoint"
        yield url
    finally:
        process.terminate()
        try:
            process.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(WAIT_S)
            raise AssertionError("the server did not stop on SIGTERM") from None
