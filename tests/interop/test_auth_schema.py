"""The agent's `initialize` answer against the stable ACP schema the TypeScript SDK ships
(v1.25 in `@agentclientprotocol/sdk` 2.4.0): valid as a whole, and every auth method is of
a type that schema defines (`agent` or `terminal`; `env_var` is gone from it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from acp import schema as acp

from tests.interop.conftest import MODULES
from tests.transports.acp.harness import running

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(90)]

SCHEMA_FILE = MODULES / "@agentclientprotocol" / "sdk" / "schema" / "v1" / "schema.json"


def stable_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    return loaded


def validator_for(schema: dict[str, Any], name: str) -> jsonschema.Draft202012Validator:
    root = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{name}"}
    return jsonschema.Draft202012Validator(root)


def auth_method_types(schema: dict[str, Any]) -> set[str]:
    """The `type` values the schema's `AuthMethod` union names (untyped means `agent`)."""
    types = set()
    for branch in schema["$defs"]["AuthMethod"]["anyOf"]:
        const = branch.get("properties", {}).get("type", {}).get("const")
        types.add(const or branch["title"])
    return types


async def test_initialize_is_valid_v1_stable_with_only_its_auth_method_types(
    node: str, tmp_path: Path
) -> None:
    schema = stable_schema()
    caps = acp.ClientCapabilities(auth=acp.AuthCapabilities(terminal=True))
    async with running(tmp_path, model="openai:some-model") as run:
        await run.conn.initialize(protocol_version=1, client_capabilities=caps)
        index, _ = run.response_index("initialize")
        result = run.wire[index].message["result"]
    assert auth_method_types(schema) == {"agent", "terminal"}
    errors = [e.message for e in validator_for(schema, "InitializeResponse").iter_errors(result)]
    assert errors == []
    types = [m.get("type", "agent") for m in result["authMethods"]]
    assert types == ["agent", "terminal"]
    assert set(types) <= auth_method_types(schema)
