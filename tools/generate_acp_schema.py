"""Regenerate `steerable_bridge/transports/acp/schema/stable.py` from the official schema JSON.

The Python ACP SDK (`agent-client-protocol` 0.12.1) speaks schema 1.19; the stable schema is
v1.25, bundled in the TypeScript SDK `@agentclientprotocol/sdk` 2.4.0 that `tests/interop`
installs. The types the Python SDK lacks (elicitation, notices, compaction updates) are
generated from that JSON with datamodel-code-generator, never written by hand. Run it with
`uv run python tools/generate_acp_schema.py` after `npm ci` in `tests/interop`; the module's
header records the schema file's SHA-256, which `tests/transports/acp/test_stable_schema.py`
checks against the installed package so a stale copy fails loudly.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDK = ROOT / "tests/interop/node_modules/@agentclientprotocol/sdk"
SCHEMA = SDK / "schema/v1/schema.json"
OUT = ROOT / "steerable_bridge/transports/acp/schema/stable.py"
GENERATOR = "datamodel-code-generator==0.89.0"
OPTIONS = [
    "--input-file-type", "jsonschema",
    "--output-model-type", "pydantic_v2.BaseModel",
    "--target-python-version", "3.11",
    "--use-annotated",
    "--use-union-operator",
    "--use-standard-collections",
    "--field-constraints",
    "--use-schema-description",
    "--use-double-quotes",
    "--disable-timestamp",
    "--snake-case-field",
    "--allow-population-by-field-name",
]  # fmt: skip


def sdk_version() -> str:
    """The version of the TypeScript SDK whose schema JSON is the source."""
    import json

    return str(json.loads((SDK / "package.json").read_text())["version"])


def main() -> int:
    if not SCHEMA.exists():
        print(f"error: {SCHEMA} is missing; run `npm ci` in tests/interop first", file=sys.stderr)
        return 2
    digest = hashlib.sha256(SCHEMA.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "stable.py"
        subprocess.run(
            ["uvx", "--from", GENERATOR, "datamodel-codegen", "--input", str(SCHEMA),
             "--output", str(raw), *OPTIONS],
            check=True,
        )  # fmt: skip
        body = raw.read_text()
    header = (
        '"""ACP stable schema v1.25 as pydantic models, generated, not written by hand.\n\n'
        f"Source: @agentclientprotocol/sdk {sdk_version()} schema/v1/schema.json\n"
        f"SHA-256: {digest}\n"
        "Regenerate: uv run python tools/generate_acp_schema.py\n"
        '"""\n\n'
        "# ruff: noqa\n"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(header + body)
    print(f"wrote {OUT.relative_to(ROOT)} ({len(body.splitlines())} lines, schema {digest[:12]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
