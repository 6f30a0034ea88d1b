"""Wire models of the ACP stable schema (v1.25) that the Python SDK does not ship yet.

`stable.py` is generated from the official schema JSON (see `tools/generate_acp_schema.py`)
and is never edited by hand. Import the few types the SDK lacks from here — elicitation,
notices, compaction updates, their capabilities — and keep using the SDK's own models for
everything else; as SDK releases add a type, move its users to the SDK and stop importing it
from here.
"""
