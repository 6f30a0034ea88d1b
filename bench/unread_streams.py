"""Memory of `serve` under streams whose clients never read, and after those clients leave.

Starts `steerable-bridge serve` (loopback, a SQLite store in a temp folder unless
`--storage` says otherwise, a scripted model that streams a
long reply in small pieces with no pause, so every stream has far more to send than any
socket buffer holds) and opens `--streams` concurrent `POST /agent` requests on raw loopback
sockets whose receive buffers are small and which never read a byte. It samples the
server's RSS every `--every` seconds for `--duration` seconds, then closes every client and
samples for `--after` seconds more. Prints the RSS at the start (after a warm-up run), its
peak and its last value while the streams hang, the value after the clients left, how
many requests were answered 503 (the concurrent-run cap), and how many runs the server
reports open at the end (`/metrics`, `steerable_sse_clients`), and says whether the
targets hold: flat once the cap is reached (the last value at most 10 % above the value at a
quarter of the way), and back within 10 % of the start after the clients leave. Extra
server options go after `--` (e.g. `-- --max-runs 16`); `--src DIR` runs the server from
another checkout (PYTHONPATH), to compare builds; `--malloc` starts it with
`PYTHONMALLOC=malloc` (small objects from glibc's malloc, whose free pages the server's
`malloc_trim` after a burst can give back, instead of CPython's arenas). Every wait is
bounded. `--probe` starts the server through `arena_probe.py` and prints, after each burst,
its map of CPython's arenas (which objects keep which arena), once that burst's figures are
taken (the map allocates). `--bursts N` repeats the round (streams, then leaving) and prints
the RSS after each. The figures (README "Memory after a burst"), 80 streams, on a 2-core
machine shared with other work: `--duration 120 --after 20 --every 10`: start ~63, peak ~85,
after +6 / +8 % of the start (two runs) once the server makes its own `Date` header,
`loads_strict` shares one decoder and the signal poll parks while no turn runs (before: +14
/ +10 / +16 %; with only the poll parked, +14 / +11 %; with the decoder too, +11 / +12 %;
earlier passes +10 to +14 %); `--duration 40 --after 20 --every 10 --bursts 3` (before
these): after 71.8, 73.0, 73.1 MB; with `--malloc` ~67 / ~68 MB (+1 %).
Run: `uv run python bench/unread_streams.py [--streams 80] [--duration 120] [--after 20]`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TEXT = "All work and no play makes a long stream, and nobody reads it. " * 4000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_healthy(base: str, server: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the server did not start within {seconds:g} s")


def request(port: int, index: int) -> bytes:
    body = json.dumps(
        {
            "threadId": f"unread-{index}",
            "runId": f"run-{index}",
            "messages": [{"id": f"u-{index}", "role": "user", "content": "talk"}],
        }
    ).encode()
    head = (
        f"POST /agent HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def open_unread(port: int, index: int) -> socket.socket:
    """A client that sends its request and then never reads (a small receive buffer)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(request(port, index))
    return sock


def status_of(sock: socket.socket) -> str:
    """The status line, read without draining the stream (peek, bounded)."""
    sock.settimeout(5)
    try:
        head = sock.recv(64, socket.MSG_PEEK)
    except OSError:
        return "?"
    return head.split(b"\r\n", 1)[0].decode(errors="replace")


def open_streams(base: str) -> float:
    try:
        text = httpx.get(f"{base}/metrics", timeout=5).text
    except httpx.HTTPError:
        return float("nan")
    for line in text.splitlines():
        if line.startswith("steerable_sse_clients"):
            return float(line.split()[-1])
    return float("nan")


def one_burst(args: argparse.Namespace, port: int, pid: int, start: float, burst: int) -> float:
    """One round: open the unread streams, sample, close them, sample; print the verdicts
    and return the RSS after the clients left."""
    base = f"http://127.0.0.1:{port}"
    clients = [open_unread(port, i + burst * args.streams) for i in range(args.streams)]
    began = time.monotonic()
    samples: list[tuple[float, float]] = []
    while (now := time.monotonic() - began) < args.duration:
        samples.append((now, rss_mb(pid)))
        print(f"  t={now:6.1f}s  rss={samples[-1][1]:7.1f} MB", flush=True)
        time.sleep(args.every)
    statuses = [status_of(sock) for sock in clients]
    refused = sum("503" in status for status in statuses)
    open_during = open_streams(base)
    for sock in clients:
        sock.close()
    left = time.monotonic()
    while time.monotonic() - left < args.after:
        time.sleep(args.every)
        print(f"  after +{time.monotonic() - left:5.1f}s  rss={rss_mb(pid):7.1f} MB")
    after = rss_mb(pid)
    peak = max(rss for _, rss in samples)
    last = samples[-1][1]
    quarter = next(rss for at, rss in samples if at >= args.duration / 4)
    print(f"start {start:.1f} MB, peak {peak:.1f} MB, last {last:.1f} MB,", end=" ")
    print(f"after {after:.1f} MB ({(after - start) / start * 100:+.0f} % of the start)")
    print(
        f"503 answers: {refused} of {args.streams}; runs open while stuck: {open_during:g},"
        f" after the clients left: {open_streams(base):g}"
    )
    flat = last <= 1.10 * quarter  # no growth: falling (runs ended, memory released) is fine
    back = after <= 1.10 * start
    print(f"flat after the cap (last at most 10 % above t={args.duration / 4:g}s): {flat}")
    print(f"back within 10 % of the start after the clients left: {back}")
    if args.probe:
        print_probe(pid, Path(args.probe_out), f"after burst {burst + 1}")
    return after


def print_probe(pid: int, out: Path, when: str) -> None:
    """Ask the server (started through `arena_probe.py`) for its arena map and print it."""
    out.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if not out.exists():
        print(f"arena probe {when}: no answer within 60 s")
        return
    print(f"arena probe {when}:")
    for line in out.read_text().splitlines():
        print(f"  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=80)
    parser.add_argument("--duration", type=float, default=120.0, help="seconds (120)")
    parser.add_argument("--after", type=float, default=20.0, help="seconds after (20)")
    parser.add_argument("--every", type=float, default=5.0, help="sampling period (5 s)")
    parser.add_argument("--bursts", type=int, default=1, help="rounds of streams, then leaving (1)")
    parser.add_argument(
        "--storage", default="", help="serve --storage (default: a SQLite file in a temp folder)"
    )
    parser.add_argument(
        "--session-cache",
        default="",
        help="STEERABLE_SESSION_CACHE for the server (idle sessions kept; default: its own)",
    )
    parser.add_argument("--src", default="", help="run the server from another checkout")
    parser.add_argument(
        "--malloc", action="store_true", help="run the server with PYTHONMALLOC=malloc"
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="after each burst, print the server's arena map (bench/arena_probe.py)",
    )
    parser.add_argument("server_options", nargs="*", help="extra serve options, after --")
    args = parser.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "long.json"
        rounds = [{"text": TEXT, "chunk_size": 16, "delay_ms": 0}]
        script.write_text(json.dumps({"rounds": rounds, "loop": True}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEERABLE_")}
        if args.src:
            env["PYTHONPATH"] = args.src
        if args.malloc:
            env["PYTHONMALLOC"] = "malloc"
        if args.session_cache:
            env["STEERABLE_SESSION_CACHE"] = args.session_cache
        entry = ["-m", "steerable_bridge.cli"]
        if args.probe:
            args.probe_out = str(Path(folder) / "arena-probe.txt")
            env["ARENA_PROBE_OUT"] = args.probe_out
            entry = [str(Path(__file__).resolve().with_name("arena_probe.py"))]
        command = [sys.executable, *entry, "serve", "--port", str(port)]
        storage = args.storage or str(Path(folder) / "sessions.db")
        command += ["--storage", storage, "--model", f"scripted:{script}"]
        command += ["--log-level", "warning", *args.server_options]
        # cwd: not this checkout, or `-m` would import it ahead of --src
        server = subprocess.Popen(command, env=env, cwd=folder, stdout=subprocess.DEVNULL)
        try:
            wait_until_healthy(base, server, 30)
            warm = {"threadId": "warm", "runId": "w", "messages": [{"id": "w", "role": "user"}]}
            warm["messages"][0]["content"] = "warm up"  # type: ignore[index]
            httpx.post(f"{base}/agent", json=warm, timeout=60)
            start = rss_mb(server.pid)
            print(f"start: {start:.1f} MB RSS ({args.streams} unread streams next)", flush=True)
            if args.probe:
                print_probe(server.pid, Path(args.probe_out), "at the start")
            afters: list[float] = []
            for burst in range(args.bursts):
                if burst:
                    print(f"burst {burst + 1}: {args.streams} unread streams again", flush=True)
                afters.append(one_burst(args, port, server.pid, start, burst))
            if args.bursts > 1:
                shown = ", ".join(f"{mb:.1f}" for mb in afters)
                print(f"after each burst: {shown} MB (start {start:.1f} MB)")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
