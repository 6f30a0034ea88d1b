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

import array
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
        if len(fields) == 5 and fields[1].startswith("r"):  # readable, no path: anonymous
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
    """The arenas' used pools found by their headers, sparsest arenas first, with the
    objects in the sparsest (found by their type pointers) and what refers to them.

    The sparsest arenas' pools are copied (as bytes: malloc's, not pymalloc's) before
    anything else is made, and their blocks read from the copies: what the probe makes
    afterwards lands in exactly those pools (the ones a burst's frees left first in line)
    and must not be counted."""
    pools = used_pools()
    blocks = array.array("Q", bytes(8 * 65536))
    for at in range(0, len(pools), 4):
        blocks[pools[at + 1] % 65536] += pools[at + 3]
    sparse = sorted((i for i in range(65536) if blocks[i]), key=blocks.__getitem__)[:SHOWN]
    copies = [
        (pools[at + 1], pools[at], pools[at + 2], ctypes.string_at(pools[at], 1 << POOL_BITS))
        for at in range(0, len(pools), 4)
        if pools[at + 1] in sparse
    ]
    arenas = len({pools[at + 1] for at in range(0, len(pools), 4)})
    lines = [f"pools in use: {len(pools) // 4} in {arenas} arenas (by their headers)"]
    types = known_types()
    for index in sparse:
        found: list[object] = []
        raw = 0
        mine = [copy for copy in copies if copy[0] == index]
        for _, pool, szidx, copy in mine:
            for block in allocated_blocks(pool, szidx, copy):
                obj = object_at(block, copy[block - pool : block - pool + 48], types)
                if obj is None:
                    raw += 1
                else:
                    found.append(obj)
        kinds = collections.Counter(type(obj).__qualname__ for obj in found)
        top = ", ".join(f"{name} {n}" for name, n in kinds.most_common(6))
        lines.append(
            f"arena {index}: {len(mine)} pools, {blocks[index]} blocks:"
            f" {len(found)} objects ({top}), {raw} other blocks"
        )
        for at in range(min(SAMPLES, len(found))):  # no slice: it would refer to them too
            lines.append(f"    {_sample(found[at])}  <- {_referrers(found[at], found)}")
        del found
    return lines


SAMPLES = 6
"""Objects shown per sparse arena."""
POOL_OVERHEAD = 48
"""`sizeof(struct pool_header)`, rounded up to the 16-byte alignment."""


def used_pools() -> array.array[int]:
    """(pool address, arena index, size class, blocks in use) of every pool in use, flat.
    Read from the headers at each 16 KiB boundary of the readable anonymous mappings; a
    header counts when it is self-consistent (`maxnextoffset` is the pool size less one
    block, as pymalloc sets it)."""
    size_of_pool = 1 << POOL_BITS
    found = array.array("Q")
    header = ctypes.c_uint * 12
    for start, end in anonymous_mappings():
        pool = (start + size_of_pool - 1) & ~(size_of_pool - 1)
        while pool + size_of_pool <= end:
            fields = header.from_address(pool)
            count, index, szidx = fields[0], fields[8], fields[9]
            nextoffset, maxnext = fields[10], fields[11]
            size = (szidx + 1) << 4
            if (
                0 < count <= (size_of_pool - POOL_OVERHEAD) // size
                and szidx < 32
                and maxnext == size_of_pool - size
                and POOL_OVERHEAD <= nextoffset <= maxnext + size
            ):
                found.extend((pool, index, szidx, count))
            pool += size_of_pool
    return found


def allocated_blocks(pool: int, szidx: int, copy: bytes) -> list[int]:
    """The addresses of the pool's blocks in use (handed out, less its free list), read
    from a copy of the pool."""
    size = (szidx + 1) << 4
    nextoffset = int.from_bytes(copy[40:44], "little")
    free: set[int] = set()
    block = int.from_bytes(copy[8:16], "little")
    while pool <= block < pool + len(copy) and len(free) < len(copy):
        free.add(block)
        offset = block - pool
        block = int.from_bytes(copy[offset : offset + 8], "little")
    return [
        pool + offset
        for offset in range(POOL_OVERHEAD, min(nextoffset, len(copy) - size + 1), size)
        if pool + offset not in free
    ]


def known_types() -> set[int]:
    """The addresses of every type object (all subclasses of `object`, static ones too)."""
    seen: set[int] = {id(type), id(object)}
    pending: list[type] = [object]
    while pending:
        kind = pending.pop()
        try:
            subclasses = type.__subclasses__(kind)
        except TypeError:
            continue
        for sub in subclasses:
            if id(sub) not in seen:
                seen.add(id(sub))
                pending.append(sub)
    return seen


def object_at(block: int, head: bytes, types: set[int]) -> object | None:
    """The object a block holds (its header at the block, after a GC header, or after a
    managed dict's two pointers too: `head` is a copy of the block's first bytes), or None
    when none of these looks like one."""
    for offset in (0, 16, 32):
        refcount = int.from_bytes(head[offset : offset + 8], "little", signed=True)
        kind = int.from_bytes(head[offset + 8 : offset + 16], "little")
        if 0 < refcount < 1 << 32 and kind in types:
            live = ctypes.string_at(block + offset, 16)  # freed since the copy: skipped
            if live[8:] != head[offset + 8 : offset + 16] or live[:8] == bytes(8):
                return None
            return ctypes.cast(block + offset, ctypes.py_object).value
    return None


def _referrers(obj: object, local: list[object]) -> str:
    """The types of what refers to `obj` (gc-tracked referrers only)."""
    found = [r for r in gc.get_referrers(obj) if r is not local]
    kinds = collections.Counter(type(r).__qualname__ for r in found)
    del found
    return ", ".join(f"{name} {n}" for name, n in kinds.most_common(4)) or "nothing tracked"


def _sample(obj: object) -> str:
    try:
        text = repr(obj)
    except Exception as err:
        text = f"<repr failed: {err!r}>"
    return text[:120]


def write_probe(path: Path) -> None:
    lines = ["malloc stats:", *malloc_stats(), *arena_map()]
    partial = path.with_name(path.name + ".partial")
    partial.write_text("\n".join(lines) + "\n")
    partial.replace(path)  # whoever waits for the file sees it whole


def main() -> int:
    out = Path(os.environ["ARENA_PROBE_OUT"])

    def on_signal(signum: int, frame: FrameType | None) -> None:
        child = os.fork()  # the child maps a snapshot; the server makes next to nothing
        if child == 0:
            try:
                write_probe(out)
            finally:
                os._exit(0)
        os.waitpid(child, 0)

    signal.signal(signal.SIGUSR1, on_signal)
    from steerable_bridge.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
