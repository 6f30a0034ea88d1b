"""File names that are not UTF-8: shown with a visible escape, and found again from it.

POSIX names are bytes; Python decodes the ones that are not UTF-8 with `surrogateescape`, so
`b"bad\\xff.txt"` lists as `"bad\\udcff.txt"`, a string UTF-8 cannot encode (it would break
the event that carries it, the store and both wires). `shown(name)` renders such a name with
a visible `\\xNN` escape for each byte that is not UTF-8 (`bad\\xff.txt`) and returns every
other name unchanged; `on_disk(path, cwd)` maps a path the model copied from such a listing
back to the name on disk, when that file exists and the path as written does not, so the
tools still work on it. Used by `search.py` (listing, glob, grep) and `paths.py`; no I/O
beyond `os.path.lexists`.
"""

from __future__ import annotations

import os
import re

from steerable_bridge.runtime.encoding.surrogates import has_surrogates, scrub

__all__ = ["on_disk", "shown"]

_BYTE_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")


def shown(name: str) -> str:
    """`name` as text any encoder takes: bytes that are not UTF-8 as `\\xNN`."""
    if not has_surrogates(name):
        return name
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file system decode makes: not a byte
        return scrub(name)
    return raw.decode("utf-8", "backslashreplace")


def on_disk(path: str, cwd: str) -> str:
    """The name on disk for a path written with `shown`'s escapes; else `path` itself."""
    if "\\x" not in path:
        return path
    parts: list[bytes] = []
    at = 0
    for match in _BYTE_ESCAPE.finditer(path):
        parts.append(path[at : match.start()].encode("utf-8", "surrogateescape"))
        parts.append(bytes([int(match.group(1), 16)]))
        at = match.end()
    parts.append(path[at:].encode("utf-8", "surrogateescape"))
    candidate = os.fsdecode(b"".join(parts))
    if candidate == path or os.path.lexists(os.path.join(cwd, path)):
        return path
    return candidate if os.path.lexists(os.path.join(cwd, candidate)) else path
