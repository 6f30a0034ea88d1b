"""Text for a terminal: control characters from sessions, files and models shown, not obeyed.

What the CLI prints comes partly from elsewhere — file names, session titles, a model's
text, a remote agent's messages — and a raw ESC (or an 8-bit CSI) in it would move the
cursor, recolour the screen, retitle the window or worse. `printable(text)` replaces every
C0 control, DEL and C1 control with a visible `\\xNN` escape (keeping newline and tab,
which layout needs, unless told otherwise), and the Unicode bidirectional overrides and
isolates with `\\uNNNN` (they can make a line read differently from what it holds).
`say(text, file=)` prints what `printable` returns. `json_printable(text)` does the same for
JSON text without breaking it: C0 is already
escaped by the encoder, and DEL / C1 / bidi controls become `\\u00NN`. Every command that
prints such text uses one of the two; the tables are built once, at import.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["json_printable", "printable", "say"]

_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))

_TABLE: dict[int, str] = {c: f"\\x{c:02x}" for c in _CONTROLS} | {c: f"\\u{c:04x}" for c in _BIDI}
_LAYOUT = {ord("\n"): "\n", ord("\t"): "\t"}
_KEEP_LAYOUT = _TABLE | _LAYOUT
_JSON = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0), *_BIDI)}


def printable(text: str, *, layout: bool = True) -> str:
    """`text` with control characters escaped; `layout=False` escapes newline and tab too
    (for one-line fields such as a title or a path)."""
    return text.translate(_KEEP_LAYOUT if layout else _TABLE)


def json_printable(text: str) -> str:
    """JSON text with the control characters a JSON encoder leaves raw escaped as `\\u00NN`."""
    return text.translate(_JSON)


def say(text: str = "", *, file: TextIO | None = None) -> None:
    """`print(printable(text))`, to stdout or `file`."""
    print(printable(text), file=file if file is not None else sys.stdout)
