"""A tiny stdio MCP server for the tests, written with the official SDK (`MCPServer`).

Run as `python mcp_server.py`; `--slow` sleeps before serving (a server that never answers
in time), `--crash` exits at once with a message on stderr, `--many` adds 70 small tools
and one whose input schema is about 40 KB (for the tool-list caps), `--spy` adds
`environ_report`: everything the server can learn of environments (its own, its parent's
and every other process's `/proc/PID/environ` it may read) — what a hostile server would
send home — `reach(port)`, which tries a TCP connection to 127.0.0.1:port, `whoami`,
its pid and whether it can write its folder, and `escape`, which leaves a `sleep` running
in a session of its own (no longer its child) and returns its pid, and `--broken-text` a tool
whose answer holds a lone UTF-16 surrogate escape.
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


if "--broken-text" in sys.argv:
    # Answers holding a lone UTF-16 surrogate escape, as a JS server's JSON.stringify writes
    # them: the SDK's pydantic encoder cannot, so the escape is put in as the line is written.
    import functools
    import io

    import anyio
    import mcp.server.mcpserver.server as mcp_server_module
    from mcp.server.stdio import stdio_server

    class _Escaping(io.TextIOBase):
        def write(self, text: str) -> int:
            sys.__stdout__.write(text.replace("@LONE@", "\\ud83d"))  # type: ignore[union-attr]
            return len(text)

        def flush(self) -> None:
            sys.__stdout__.flush()  # type: ignore[union-attr]

    mcp_server_module.stdio_server = functools.partial(  # type: ignore[attr-defined]
        stdio_server, stdout=anyio.wrap_file(_Escaping())
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def broken_text() -> str:
        """Answer with half of an emoji's surrogate pair."""
        return "half @LONE@ of an emoji"


if "--many" in sys.argv:
    from typing import Literal

    for index in range(70):
        server.add_tool(lambda: "ok", name=f"extra_{index:02d}", description="A filler tool.")
    Huge = Literal[tuple(f"choice_number_{i}" for i in range(2000))]  # type: ignore[valid-type]

    def pick(choice: Huge) -> str:  # type: ignore[valid-type]
        return str(choice)

    server.add_tool(pick, name="huge_schema", description="Takes one of 2,000 choices.")


if "--spy" in sys.argv:
    import os

    @server.tool(description="Report every credential this process can read.")
    def environ_report() -> str:
        """Its own environment, then the credential-looking variables of every other
        process whose `/proc/PID/environ` it can read (one line each; kept short)."""
        wanted = ("KEY", "TOKEN", "SECRET", "PASS")
        found = [f"own: {sorted(os.environ.items())}", f"ppid: {os.getppid()}"]
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    with open(f"/proc/{entry}/environ", "rb") as handle:
                        items = handle.read().decode(errors="replace").split("\0")
                except OSError:
                    continue
                loot = [i for i in items if any(w in i.split("=", 1)[0] for w in wanted)]
                found.append(f"/proc/{entry}/environ: {' '.join(loot)}")
        return "\n".join(found)

    @server.tool(description="Try to connect to 127.0.0.1:port.")
    def reach(port: int) -> str:
        import socket

        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                return "connected"
        except OSError as error:
            return f"unreachable: {error}"

    @server.tool(description="Leave a process behind in a session of its own; its pid.")
    def escape() -> str:
        import subprocess

        script = "setsid sh -c 'echo $$; exec sleep 1000 >/dev/null' </dev/null 2>/dev/null &"
        done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, check=True)
        return done.stdout.decode().strip()

    @server.tool(description="This process's pid and whether it can write its cwd.")
    def whoami() -> str:
        return f"pid {os.getpid()} writable {os.access(os.getcwd(), os.W_OK)}"


if __name__ == "__main__":
    server.run()
