"""The TypeScript interop clients import the SDK's `unstable` entrypoint where they need it.

`@agentclientprotocol/sdk` 2.x strips unstable fields (session/fork, plan updates, ...) from
what its default entrypoint parses, so a client that drives those through `"."` would see
them vanish. Every `.mjs` here that imports the SDK and uses fork or plan updates must import
`@agentclientprotocol/sdk/unstable` (and its zod schemas from the unstable tree), never the
default entrypoint. Reads the files only: no node needed.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMPORT = re.compile(r"""from\s+["'](@agentclientprotocol/sdk[^"']*|[^"']*/sdk/dist/[^"']*)["']""")
UNSTABLE_USE = re.compile(r"""session/fork|forkSession|["']plan["']|unstable_""")


def test_every_acp_client_script_imports_the_unstable_entrypoint() -> None:
    scripts = {p.name: p.read_text(encoding="utf-8") for p in sorted(HERE.glob("*.mjs"))}
    acp_scripts = {name: text for name, text in scripts.items() if IMPORT.search(text)}
    assert {"acp_client.mjs", "conformance_acp.mjs", "validator_client.mjs"} <= set(acp_scripts)
    for name, text in acp_scripts.items():
        imports = IMPORT.findall(text)
        if UNSTABLE_USE.search(text):
            assert "@agentclientprotocol/sdk/unstable" in imports, name
        assert "@agentclientprotocol/sdk" not in imports, f"{name} imports the default entrypoint"
        for path in imports:
            if "/dist/" in path:
                assert "/unstable/" in path, f"{name} reads schemas outside the unstable tree"
