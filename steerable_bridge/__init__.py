"""steerable-bridge: one agent runtime, served as an ACP agent and as an AG-UI endpoint.

The package holds four parts: `runtime` (the loop, the LoopEvent taxonomy, the session log,
ports), `adapters` (LLM providers, storage, workspace tools), `transports` (ACP over stdio,
AG-UI over HTTP/SSE) and `conformance` (the mapping table, decoders and checks that prove
both wires faithful). Import from the parts; this module only names the version.
"""

__version__ = "0.1.0"
