"""A map of CPython's small-object arenas in a running server, for `unread_streams.py --probe`.

Run as the server's entry point (`python bench/arena_probe.py serve ...`, the CLI's
arguments): it installs a SIGUSR1 handler, then runs `steerable_bridge.cli`. On the signal
it writes to the file `ARENA_PROBE_OUT` names what `sys._debugmallocstats()` says about the
arenas (allocated now, high-water mark, reclaimed) and a map of where the objects it can
reach live: every object the cycle collector tracks and what each refers to, mapped to its
arena by the arena index in the header of its 16 KiB pymalloc pool (64-bit CPython 3.10+:
1 MiB arenas, 16 KiB pools; the header's `arenaindex` is its fifth field, at byte 32). An
object is counted only when its pool's size class fits its size, so one malloc gave
(over 512 bytes) or made statically is left out, not misread, and a pool header is read only
inside an anonymous mapping (`/proc/self/maps`), where mmap'd arenas live. The sparsest arenas come
first, with the types of what is in them and a few samples: what pins an arena a burst
filled is usually one of a handful of objects made during or after it. Bench-only: it
reads process memory through ctypes and may allocate while it maps (after the burst).
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import gc
import os
import signal
import sys
from pathlib import Path
from types import FrameType

POOL_BITS = 14
"""16 KiB pools (64-bit builds since CPython 3.10)."""
ARENA_INDEX_OFFSET = 32
"""`pool_header.arenaindex`: after `ref`, `freeblock`, `nextpool`, `prevpool`."""
SIZE_INDEX_OFFSET = 36
"""`pool_header.szidx`: the pool's size class (block size = 16 * (szidx + 1))."""
SMALL = 512
SHOWN = 12
"""Arenas shown in full (the sparsest)."""
STATS = ("arenas allocated total", "arenas reclaimed", "arenas highwater", "arenas allocated cur")


def anonymous_mappings() -> list[tuple[int, int]]:
    """The process's anonymous memory mappings (where mmap'd arenas live), sorted."""
    found: list[tuple[int, int]] = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) == 5:  # no path: anonymous
            start, end = (int(part, 16) for part in fields[0].split("-"))
            found.append((start, end))
    return sorted(found)


def arena_of(obj: object, mappings: list[tuple[int, int]]) -> int | None:
    """The index of the arena holding `obj`, or None when it is not a pymalloc block."""
    try:
        size = sys.getsizeof(obj, SMALL + 1)
    except Exception:
        return None
    if size > SMALL - 32:  # a GC header or pre-header may push it past the threshold
        return None
    pool = id(obj) & ~((1 << POOL_BITS) - 1)
    at = bisect.bisect_right(mappings, (pool, sys.maxsize)) - 1
    if at < 0 or not mappings[at][0] <= pool < pool + 64 <= mappings[at][1]:
        return None  # a static object, or one in malloc's heap: no pool header to read
    szidx = ctypes.c_uint.from_address(pool + SIZE_INDEX_OFFSET).value
    if not (size - 1) >> 4 <= szidx <= ((size + 32 - 1) >> 4):
        return None
    return ctypes.c_uint.from_address(pool + ARENA_INDEX_OFFSET).value


def malloc_stats() -> list[str]:
    """The arena lines of `sys._debugmallocstats()` (written to C's stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    try:
        os.dup2(write_end, 2)
        os.close(write_end)
        sys._debugmallocstats()  # type: ignore[attr-defined]  # CPython only
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    chunks: list[bytes] = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    text = b"".join(chunks).decode(errors="replace")
    return [line.strip() for line in text.splitlines() if any(s in line for s in STATS)]


def arena_map() -> list[str]:
    """The objects reachable from the tracked ones, by arena, sparsest arenas first."""
    tracked = gc.get_objects()
    seen: dict[int, object] = {id(obj): obj for obj in tracked}
    for obj in tracked:
        for ref in gc.get_referents(obj):
            seen.setdefault(id(ref), ref)
    arenas: dict[int, list[object]] = collections.defaultdict(list)
    mappings = anonymous_mappings()
    for obj in seen.values():
        index = arena_of(obj, mappings)
        if index is not None:
            arenas[index].append(obj)
    lines = [f"objects mapped: {sum(map(len, arenas.values()))} in {len(arenas)} arenas"]
    for index, objects in sorted(arenas.items(), key=lambda item: len(item[1]))[:SHOWN]:
        kinds = collections.Counter(type(obj).__qualname__ for obj in objects)
        top = ", ".join(f"{name} {n}" for name, n in kinds.most_common(6))
        lines.append(f"arena {index}: {len(objects)} objects ({top})")
        for obj in objects[:3]:
            lines.append(f"    {type(obj).__qualname__}: {_sample(obj)}")
    return lines


def _sample(obj: object) -> str:
    try:
        text = repr(obj)
    except Exception as err:
        text = f"<repr failed: {err!r}>"
    return text[:120]


def write_probe(path: Path) -> None:
    gc.collect()
    lines = ["malloc stats:", *malloc_stats(), *arena_map()]
    partial = path.with_name(path.name + ".partial")
    partial.write_text("\n".join(lines) + "\n")
    partial.replace(path)  # whoever waits for the file sees it whole


def main() -> int:
    out = Path(os.environ["ARENA_PROBE_OUT"])

    def on_signal(signum: int, frame: FrameType | None) -> None:
        write_probe(out)

    signal.signal(signal.SIGUSR1, on_signal)
    from steerable_bridge.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
