"""A one-tool MCP server over stdio (`lookup`), for agents that ask permission for MCP tools.

fast-agent asks the ACP client before it runs an MCP server's tool (its local shell runs
without asking), so the interop tests give it this server (`--stdio "PYTHON mcp_lookup.py"`),
run by the Python of fast-agent's own venv, which has the `mcp` SDK (2.x: `MCPServer`).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("lookup")


@server.tool()
def lookup(topic: str) -> str:
    """Look a topic up and return what is known about it."""
    return f"lookup result for {topic}: 42"


if __name__ == "__main__":
    server.run()
