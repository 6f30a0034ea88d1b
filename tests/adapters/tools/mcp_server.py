"""A tiny stdio MCP server for the tests, written with the official SDK (`MCPServer`).

Run as `python mcp_server.py`; `--slow` sleeps before serving (a server that never answers
in time), `--crash` exits at once with a message on stderr.
"""

from __future__ import annotations

import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

if "--crash" in sys.argv:
    print("boom: this server refuses to start", file=sys.stderr)
    sys.exit(3)
if "--slow" in sys.argv:
    time.sleep(60)

server = MCPServer("notes")
NOTES: list[str] = []


@server.tool(description="Add a note and return how many there are.")
def add_note(text: str) -> str:
    NOTES.append(text)
    return f"{len(NOTES)} notes"


@server.tool(
    description="Count the words of a text.",
    annotations=ToolAnnotations(read_only_hint=True),
)
def word_count(text: str) -> str:
    return str(len(text.split()))


@server.tool(description="Always fails.")
def explode() -> str:
    raise ValueError("kaboom")


if __name__ == "__main__":
    server.run()
