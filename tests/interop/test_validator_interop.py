"""The official TypeScript ACP client (`@agentclientprotocol/sdk` 2.4.0) takes the validator's turn.

Runs `tests/interop/validator_client.mjs` with node: a careful client that advertises fs and
terminal, validates everything it receives with the SDK's zod schemas and presses stop when
asked. The validator's JSON report must show every check it could run passing. Without node
the test is skipped — loudly, with a warning — never passed. It lives with the other interop
tests so the `node` fixture installs the Node packages first on a fresh clone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

INTEROP = Path(__file__).resolve().parent


@pytest.mark.timeout(60)
def test_the_typescript_client_passes_the_validator(tmp_path: Path, node: str) -> None:
    report_path = tmp_path / "report.json"
    command = [
        sys.executable,
        "-m",
        "steerable_bridge.cli",
        "acp",
        "--validate-client",
        "--report",
        str(report_path),
        "--cancel-timeout",
        "20",
    ]
    env = {
        **os.environ,
        "VALIDATOR_CMD": json.dumps(command),
        "VALIDATOR_CWD": str(tmp_path),
        "PYTHONPATH": str(INTEROP.parent.parent),
    }
    done = subprocess.run(
        [node, str(INTEROP / "validator_client.mjs")],
        cwd=INTEROP,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, f"the TypeScript client failed:\n{done.stderr}\n{done.stdout}"
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["stopReason"] == "cancelled"
    assert seen["summaryTable"] is True
    assert {"plan", "tool_call", "tool_call_update", "usage_update"} <= set(seen["kinds"])
    report = json.loads(report_path.read_text())
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert failed == [], failed
    passed = {c["id"] for c in report["checks"] if c["status"] == "pass"}
    assert {
        "permission.option_offered",
        "fs.read_text_file.line_limit",
        "terminal.kill",
        "cancel.session_cancel",
        "cancel.permission_cancelled",
        "update.config_option_update",
        "transcript.rules",
    } <= passed
    assert report["target"] == "validator-interop 1.0.0"
