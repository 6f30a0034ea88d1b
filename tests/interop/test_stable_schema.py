"""The generated ACP v1.25 models were generated from the schema JSON `npm ci` installs here.

`steerable_bridge/transports/acp/schema/stable.py` records the SHA-256 of the TypeScript SDK's
`schema/v1/schema.json`; when the pinned SDK's schema changes, this fails until the models are
regenerated (`uv run python tools/generate_acp_schema.py`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULE = HERE.parents[1] / "steerable_bridge/transports/acp/schema/stable.py"


def test_the_models_match_the_installed_schema_json(node: str) -> None:
    schema = HERE / "node_modules" / "@agentclientprotocol/sdk/schema/v1/schema.json"
    digest = hashlib.sha256(schema.read_bytes()).hexdigest()
    assert f"SHA-256: {digest}" in MODULE.read_text()[:600], (
        "the schema JSON changed: uv run python tools/generate_acp_schema.py"
    )
