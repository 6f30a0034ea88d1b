"""The prompt-path figure of issue 29: which files of `steerable_bridge` run for one prompt.

For each wire it serves one plain text prompt, answered with text and no tool call, end to
end in this process, and records every package file one of whose functions ran while the
prompt was in flight. ACP: the agent side `steerable-bridge acp` composes
(`commands/acp.py`'s `prepare` and `serve_options`, `transports/acp/server.py`'s `serve`)
on a socket pair, driven by the ACP SDK's client: `initialize` and `session/new` first,
then the window is `session/prompt`, request to response. AG-UI: the app
`steerable-bridge serve` builds (`commands/serve.py`'s `build_app`, its lifespan running),
driven through httpx's ASGI transport: the window is one `POST /agent` of a RunAgentInput
for a new thread, to the end of its SSE stream, which RUN_FINISHED closes. The model is
`openai:bench` over real HTTP (`bench/openai_server.py` on 127.0.0.1, an OS-picked port),
so the provider adapter and its HTTP client are on the path; storage is `memory`, and the
process environment is set aside for the run (no `STEERABLE_*`, `OPENAI_*`, `ANTHROPIC_*`
or `OTEL_*`; state and config under a temporary folder). A file counts when a function,
method or coroutine of it was called or resumed in the window, in any thread
(`sys.setprofile` / `threading.setprofile`, installed before the server starts and
recording only during the window); module bodies are left out, so a lazy import counts
only for the functions it then runs. Work running beside the prompt in the same process
(the signal relay, idle timers) counts when it runs in the window. Each wire is measured
in a fresh interpreter, so neither warms the other's caches. Run it as
`uv run python tools/prompt_path.py [--list] [--json]`; `tools/structure.py --prompt-path`
prints the same counts. The tool only measures and prints; it never edits a file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, cast

import anyio

TRANSPORTS = ("acp", "agui")
LAYERS = ("transports", "runtime", "adapters", "commands")
PROMPT = "Say hello in a few words."
TOKENS = 8
"""Text chunks the fake model streams for the answer."""
LIMIT_S = 60.0
"""Bound on each phase (start, prompt, shutdown) of a measurement."""
BENCH = Path(__file__).resolve().parent.parent / "bench"
MODEL = "openai:bench"
MODEL_NOTE = f"{MODEL} over HTTP (bench/openai_server.py on 127.0.0.1), storage memory"
SET_ASIDE = ("STEERABLE_", "OPENAI_", "ANTHROPIC_", "OTEL_")


def package_dir() -> Path:
    """The directory of the `steerable_bridge` this interpreter imports."""
    import steerable_bridge

    return Path(steerable_bridge.__file__).resolve().parent


class Touched:
    """The files under `root` whose functions ran while `recording` was on, in any thread
    started after `install` (and the installing one)."""

    def __init__(self, root: Path) -> None:
        self.prefix = str(root) + os.sep
        self.files: set[str] = set()
        self.recording = False

    def _hook(self, frame: FrameType, event: str, arg: object) -> None:
        if self.recording and event == "call":
            code = frame.f_code
            if code.co_name != "<module>" and code.co_filename.startswith(self.prefix):
                self.files.add(code.co_filename)

    @contextlib.contextmanager
    def installed(self) -> Iterator[Touched]:
        threading.setprofile(self._hook)
        sys.setprofile(self._hook)
        try:
            yield self
        finally:
            sys.setprofile(None)
            threading.setprofile(None)

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        self.recording = True
        try:
            yield
        finally:
            self.recording = False

    def relative(self) -> list[str]:
        """The recorded files, relative to the package directory, sorted."""
        return sorted(path[len(self.prefix) :] for path in self.files)


@contextlib.contextmanager
def environment(base_url: str) -> Iterator[Path]:
    """The process environment for a run: the model's base URL, nothing of the user's
    configuration, state and config in a temporary folder (yielded); restored after."""
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="prompt-path-") as tmp:
        for key in [k for k in os.environ if k.startswith(SET_ASIDE)]:
            del os.environ[key]
        os.environ.update(
            STEERABLE_BASE_URL=base_url,
            STEERABLE_STORAGE="memory",
            XDG_STATE_HOME=os.path.join(tmp, "state"),
            XDG_CONFIG_HOME=os.path.join(tmp, "config"),
        )
        try:
            yield Path(tmp)
        finally:
            os.environ.clear()
            os.environ.update(saved)


def _fake_model() -> tuple[str, Callable[[], None]]:
    """Start `bench/openai_server.py` in a thread; (base URL, stop)."""
    spec = importlib.util.spec_from_file_location("openai_server", BENCH / "openai_server.py")
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {BENCH / 'openai_server.py'}; run from a checkout")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    served: tuple[str, Callable[[], None]] = module.serve_in_thread(TOKENS)
    return served


def _args(command: str, *options: str) -> argparse.Namespace:
    from steerable_bridge.cli import build_parser

    return build_parser(command).parse_args([command, "--model", MODEL, *options])


class _Editor:
    """The ACP client: counts the answer's text; refuses any permission (none is asked)."""

    def __init__(self) -> None:
        self.text = ""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if getattr(update, "session_update", None) == "agent_message_chunk":
            self.text += getattr(update.content, "text", "")

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        from acp import schema

        return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))


async def acp_prompt(touched: Touched, tmp: Path) -> str:
    """One ACP prompt through the composed agent; returns the answer's text."""
    import asyncio

    import acp
    from acp import schema

    from steerable_bridge.commands import acp as command
    from steerable_bridge.transports.acp.frames import MAX_FRAME_BYTES
    from steerable_bridge.transports.acp.server import serve

    args = _args("acp")
    extra, info = command.prepare(args)
    ours, theirs = socket.socketpair()
    agent_side = await asyncio.open_connection(sock=ours, limit=MAX_FRAME_BYTES)
    reader, writer = await asyncio.open_connection(sock=theirs, limit=MAX_FRAME_BYTES)
    editor = _Editor()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(**command.serve_options(args, extra, info), streams=agent_side))
        conn = acp.connect_to_agent(cast(Any, editor), writer, reader)  # a structural Client
        with anyio.fail_after(LIMIT_S):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp), mcp_servers=[])
        block = schema.TextContentBlock(type="text", text=PROMPT)
        with anyio.fail_after(LIMIT_S), touched.window():
            answer = await conn.prompt(session_id=session.session_id, prompt=[block])
        if answer.stop_reason != "end_turn":
            raise RuntimeError(f"the ACP prompt stopped with {answer.stop_reason}, not end_turn")
        writer.close()  # the editor closes the agent's stdin: it shuts down
        with anyio.fail_after(LIMIT_S):
            await conn.close()
    return editor.text


async def agui_prompt(touched: Touched, tmp: Path) -> str:
    """One AG-UI run through the composed app; returns the answer's text."""
    import httpx

    from steerable_bridge.commands.serve import build_app

    app = build_app(_args("serve", "--cwd", str(tmp)))
    body = {
        "threadId": "prompt-path",
        "runId": "run-1",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": PROMPT}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    transport = httpx.ASGITransport(app=app)
    client = httpx.AsyncClient(transport=transport, base_url="http://localhost")
    with anyio.fail_after(LIMIT_S):
        async with app.router.lifespan_context(app), client:
            with touched.window():
                response = await client.post("/agent", json=body)
    events = [
        json.loads(line[5:])
        for line in response.text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]
    kinds = [event.get("type") for event in events]
    if response.status_code != 200 or "RUN_FINISHED" not in kinds:
        raise RuntimeError(f"the AG-UI run did not finish: HTTP {response.status_code} {kinds}")
    return "".join(e.get("delta", "") for e in events if e.get("type") == "TEXT_MESSAGE_CONTENT")


def measure(transport: str) -> list[str]:
    """The package files (relative paths) one prompt on `transport` ran code in."""
    if transport not in TRANSPORTS:
        raise ValueError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    prompt = acp_prompt if transport == "acp" else agui_prompt
    base_url, stop = _fake_model()
    try:
        with environment(base_url) as tmp, Touched(package_dir()).installed() as touched:
            answer = anyio.run(prompt, touched, tmp)
    finally:
        stop()
    if " w0" not in answer:
        raise RuntimeError(f"the {transport} prompt was not answered by the model: {answer!r}")
    return touched.relative()


def layer(path: str) -> str:
    """The layer a package-relative path belongs to ('transports', ..., or '' at the top)."""
    head, sep, _ = path.partition("/")
    return head if sep else ""


def by_layer(files: list[str]) -> dict[str, list[str]]:
    """`files` grouped by layer, the known layers first (empty ones left out)."""
    groups: dict[str, list[str]] = {}
    for path in files:
        groups.setdefault(layer(path), []).append(path)
    order = [*LAYERS, *sorted(set(groups) - set(LAYERS))]
    return {name: groups[name] for name in order if name in groups}


def measure_apart(transport: str) -> list[str]:
    """`measure(transport)` in a fresh interpreter of the same environment."""
    command = [sys.executable, str(Path(__file__).resolve()), "--transport", transport, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=4 * LIMIT_S)
    if done.returncode != 0:
        raise RuntimeError(f"measuring {transport} failed:\n{done.stderr.strip()}")
    files: list[str] = json.loads(done.stdout)[transport]
    return files


def lines(found: dict[str, list[str]], listing: bool) -> list[str]:
    """The figure as printable lines."""
    out = [f"prompt path: files of steerable_bridge/ run by one text prompt ({MODEL_NOTE})"]
    for transport, files in found.items():
        groups = by_layer(files)
        counts = ", ".join(f"{name or 'top'} {len(paths)}" for name, paths in groups.items())
        out.append(f"  {transport}: {len(files)} files ({counts})")
        if listing:
            for name, paths in groups.items():
                out.append(f"    {name or '(top)'}/ {len(paths)}")
                out.extend(f"      {path}" for path in paths)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--transport", choices=TRANSPORTS, help="only this wire, in process")
    parser.add_argument("--list", action="store_true", help="list the files by layer")
    parser.add_argument("--json", action="store_true", help="print {transport: [files]}")
    args = parser.parse_args(argv[1:])
    if args.transport is not None:
        found = {args.transport: measure(args.transport)}
    else:
        found = {transport: measure_apart(transport) for transport in TRANSPORTS}
    print(json.dumps(found, indent=1) if args.json else "\n".join(lines(found, args.list)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
