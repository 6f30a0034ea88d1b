"""Interop: the official TypeScript ACP client (`@agentclientprotocol/sdk` 2.4.0) drives the agent.

Runs `tests/interop/acp_client.mjs` with node against `steerable-bridge acp` on a scripted
model. The script validates every response and update with the SDK's own schemas and
checks cancel, load replay and the session methods; this test checks it succeeded and what
it reported. Without node the test is skipped — loudly, with a warning — never passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TOOLS = HERE.parent / "transports" / "acp" / "acp_tools.py"

ROUNDS = [
    {
        "reasoning": "I will plan, then write.",
        "text": "Writing the note.",
        "chunk_size": 6,
        "tool_calls": [
            {
                "id": "plan-1",
                "name": "update_plan",
                "arguments": {"entries": [{"content": "Write the note", "status": "in_progress"}]},
            },
            {
                "id": "write-1",
                "name": "write_note",
                "arguments": {"path": "note.txt", "text": "from node"},
            },
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 9},
    },
    {"text": "Done.", "usage": {"prompt_tokens": 30, "completion_tokens": 2}},
    {"text": "Streaming until cancelled", "chunk_size": 5, "hang": True},
]


@pytest.mark.timeout(90)
def test_the_typescript_client_drives_the_acp_agent(tmp_path: Path, node: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"rounds": ROUNDS, "context_window": 2048}))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")},
        "ACP_PYTHON": sys.executable,
        "ACP_SCRIPT": str(script),
        "ACP_TOOLS": str(TOOLS),
        "ACP_CWD": str(tmp_path),
        "STEERABLE_DEMO_PACE_MS": "0",
        "STEERABLE_STORAGE": str(tmp_path / "sessions.db"),
        "PYTHONPATH": str(HERE.parent.parent),
    }
    done = subprocess.run(
        [node, str(HERE / "acp_client.mjs")],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=80,
    )
    assert done.returncode == 0, f"the TypeScript client failed:\n{done.stderr}\n{done.stdout}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["stopReasons"] == ["end_turn", "cancelled"]
    assert {
        "agent_message_chunk",
        "agent_thought_chunk",
        "available_commands_update",
        "config_option_update",
        "current_mode_update",
        "plan",
        "session_info_update",
        "tool_call",
        "tool_call_update",
        "usage_update",
        "user_message_chunk",
    } <= set(report["kinds"])
    assert (tmp_path / "note.txt").read_text() == "from node"
