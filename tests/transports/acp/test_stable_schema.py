"""The generated v1.25 models match the schema JSON they were generated from.

The module's header records the SHA-256 of `schema/v1/schema.json` in the TypeScript SDK that
`tests/interop` pins; when the pin moves, this fails until the models are regenerated. The
round trips check that the generated models read and write the wire shapes the spec shows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from steerable_bridge.transports.acp.schema import stable

ROOT = Path(__file__).resolve().parents[3]
MODULE = ROOT / "steerable_bridge/transports/acp/schema/stable.py"
LOCK = ROOT / "tests/interop/package-lock.json"


def test_the_models_name_the_schema_of_the_pinned_sdk() -> None:
    header = MODULE.read_text()[:600]
    version = re.search(r"@agentclientprotocol/sdk (\S+) schema/v1/schema.json", header)
    assert version is not None
    lock = json.loads(LOCK.read_text())
    pinned = lock["packages"]["node_modules/@agentclientprotocol/sdk"]["version"]
    assert version.group(1) == pinned, "regenerate: uv run python tools/generate_acp_schema.py"


def test_a_notice_and_a_compaction_update_round_trip() -> None:
    notice = {"sessionUpdate": "notice", "severity": "warning", "title": "MCP server failed"}
    update = stable.SessionNotification.model_validate({"sessionId": "s1", "update": notice})
    assert update.model_dump(by_alias=True, exclude_none=True)["update"] == notice
    chunk = {
        "sessionUpdate": "compaction_summary_chunk",
        "compactionId": "c1",
        "content": {"type": "text", "text": "so far"},
    }
    again = stable.SessionNotification.model_validate({"sessionId": "s1", "update": chunk})
    assert again.model_dump(by_alias=True, exclude_none=True)["update"] == chunk


def test_an_elicitation_request_round_trips() -> None:
    request = {
        "sessionId": "s1",
        "mode": "form",
        "message": "Which branch?",
        "requestedSchema": {
            "type": "object",
            "properties": {"branch": {"type": "string", "title": "Branch"}},
            "required": ["branch"],
        },
    }
    model = stable.CreateElicitationRequest.model_validate(request)
    assert model.model_dump(by_alias=True, exclude_none=True)["requestedSchema"]["required"] == [
        "branch"
    ]
