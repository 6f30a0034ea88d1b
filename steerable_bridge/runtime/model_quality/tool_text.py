"""A streaming stripper that finds tool-call markup and reasoning in model text, split however
it arrives.

Models served without a tool parser or a reasoning parser write their calls and their
thinking as text: `<tool_call>{...}</tool_call>`, GLM `<arg_key>` tags, Kimi and DeepSeek
special tokens, gpt-oss harmony channels, `<think>...</think>`, a bare JSON object or a
pythonic `[fn(a=1)]` list between sentences, and so on; every format is one entry of the
table in `tool_markers.py`. `MarkupStripper.feed(delta)` returns what may be shown now, as
text pieces, `Reasoning` pieces (thinking, never answer text) and `Markup` pieces (a complete
call candidate and its format); `finish()` flushes at the end of the stream.

It holds back only what may still become markup: a tail that is a prefix of a marker, an
open candidate that is still plausible, a run of backticks that may grow, a fenced block
that may be a call, and whitespace at the very start of a reply (or after its reasoning),
which goes with a call that follows it. Everything else is released at once, byte for byte.
Markup inside code (a fence or an inline span) is prose, never a candidate; framing tokens
(`<|end|>`, a stray `</think>`) are dropped. Whether a candidate really is a call (an offered
tool, valid arguments) is for the caller to decide (`pseudo_calls.py`); when it is not, the
caller shows its text unchanged. Decisions depend only on the text so far, never on where
it was split. Written by hand because no library parses these formats incrementally.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from steerable_bridge.runtime.model_quality.tool_markers import (
    BY_FIRST,
    BY_TWO,
    FENCE_LANGS,
    HARMONY_ANALYSIS,
    HARMONY_CALL,
    SINGLE,
    START_MARKERS,
    Marker,
    key_viable,
    list_viable,
    may_open,
)

__all__ = ["Markup", "MarkupStripper", "Piece", "Reasoning"]


@dataclass(frozen=True, slots=True)
class Markup:
    """A complete candidate: its format name and its exact text."""

    format: str
    raw: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Thinking the model wrote as text (`<think>...</think>`, harmony analysis)."""

    text: str


Piece = str | Markup | Reasoning

_INTEREST = re.compile(r"[<\[`\n{>]")
_MESSAGE = "<|message|>"
_HEADER_LIMIT = 300
"""A harmony header longer than this without `<|message|>` is not a header."""


class _Balance:
    """Incremental bracket matching over (), [], {} that skips quoted strings."""

    __slots__ = ("depth", "escape", "pos", "quote", "started")

    def __init__(self, pos: int = 0) -> None:
        self.depth = 0
        self.quote = ""
        self.escape = False
        self.pos = pos
        self.started = False

    def end(self, text: str, start: int = 0) -> int | None:
        """Index just past the bracket that closes the first one at or after `start`."""
        i = max(self.pos, start)
        n = len(text)
        while i < n:
            ch = text[i]
            i += 1
            if self.quote:
                if self.escape:
                    self.escape = False
                elif ch == "\\":
                    self.escape = True
                elif ch == self.quote:
                    self.quote = ""
            elif ch in "\"'" and self.started:
                self.quote = ch
            elif ch in "([{":
                self.depth += 1
                self.started = True
            elif ch in ")]}" and self.started:
                self.depth -= 1
                if self.depth == 0:
                    self.pos = i
                    return i
        self.pos = i
        return None


class MarkupStripper:
    """Splits a stream of model text into prose, reasoning and call candidates; see the
    module doc. `calls=False` looks for reasoning and framing only (no tools offered)."""

    def __init__(self, *, calls: bool = True) -> None:
        self._calls = calls
        self._buf = ""
        self._fence = 0  # length of the open code fence's backtick run, 0 when none
        self._inline = 0  # length of the open inline span's backtick run
        self._open: Marker | None = None
        self._mark = 0  # where the open candidate's marker starts in the buffer
        self._balance: _Balance | None = None
        self._joined = 0  # end of the last balanced part of a `;` chain, 0 when none
        self._tag_from = 0
        self._confirmed = False
        self._fenced = 0  # backtick run of a fenced block that may be a call, 0 when none
        self._think: Marker | None = None
        self._at_start = True
        self._lead = -1  # leading whitespace a candidate right after it takes along
        self._idle = False
        """Nothing held, nothing open, not in code, past the start: plain text passes."""

    # -- public ---------------------------------------------------------------------------

    def plain(self, delta: str) -> bool:
        """True when `delta` may be shown as it is and leaves the state unchanged (the
        common case: prose while nothing is held); then `feed` need not be called."""
        return self._idle and (
            (
                "<" not in delta
                and "[" not in delta
                and "`" not in delta
                and "{" not in delta
                and ">" not in delta
            )
            or may_open(delta) is None
        )

    def feed(self, delta: str) -> list[Piece]:
        """Add text; returns what can be decided now, in order."""
        if not delta:
            return []
        if self.plain(delta):
            return [delta]
        if self._think is not None and not self._buf and "<" not in delta:
            return [Reasoning(delta)]  # inside reasoning, nothing held: the common case
        self._buf += delta
        out: list[Piece] = []
        self._scan(out)
        self._idle = not (
            self._buf
            or self._open
            or self._at_start
            or self._fence
            or self._inline
            or self._think
            or self._fenced
        )
        return out if len(out) < 2 else _merge(out)

    def finish(self) -> list[Piece]:
        """The end of the stream (or of its text before a real call): flush what is held."""
        out: list[Piece] = []
        buf, self._buf = self._buf, ""
        if self._think is not None:
            if buf:
                out.append(Reasoning(buf))
        elif self._fenced:
            out.append(Markup("fenced_json", buf))
        elif self._open is not None and self._open.kind == "candidate":
            out.append(Markup(self._open.format, buf))
        elif buf:
            out.append(buf)
        self._open = self._balance = self._think = None
        self._fenced = self._joined = 0
        self._lead = -1
        self._idle = not (self._at_start or self._fence or self._inline)
        return _merge(out)

    # -- scanning -------------------------------------------------------------------------

    def _scan(self, out: list[Piece]) -> None:
        while self._buf:
            if self._think is not None:
                if not self._think_step(out):
                    return
            elif self._at_start:
                if not self._start():
                    return
            elif self._fenced:
                if not self._fence_step(out):
                    return
            elif self._open is not None:
                if not self._markup_step(out):
                    return
            elif not self._prose_step(out):
                return

    def _start(self) -> bool:
        """At the start of the reply or after its reasoning: hold leading whitespace and
        what may be a start-only marker. False: hold."""
        buf = self._buf
        stripped = buf.lstrip()
        if not stripped:
            return False
        lead = len(buf) - len(stripped)
        for marker in START_MARKERS:
            if marker.kind == "candidate" and not self._calls:
                continue
            if stripped.startswith(marker.text):
                self._at_start = False
                self._begin(marker, lead)
                return True
            if marker.text.startswith(stripped):
                return False
        self._at_start = False
        self._lead = lead
        return True

    def _cut(self, j: int) -> int:
        """Where text before a marker at `j` ends: 0 when only the reply's leading
        whitespace comes before it (a call takes it along)."""
        return 0 if j == self._lead else j

    def _prose_step(self, out: list[Piece]) -> bool:
        """Release prose up to the next marker (True) or what must be held (False)."""
        buf = self._buf
        pos = 0
        while True:
            m = _INTEREST.search(buf, pos)
            if m is None:
                self._release(out, len(buf))
                return False
            j = m.start()
            ch = buf[j]
            if ch == "\n":
                self._inline = 0  # inline code never spans lines in model output
                pos = j + 1
                continue
            if ch == "`":
                run = j
                while run < len(buf) and buf[run] == "`":
                    run += 1
                if run == len(buf):
                    self._release(out, self._cut(j))
                    return False  # the run may grow
                if run - j >= 3 and self._calls and not (self._fence or self._inline):
                    start = self._cut(j)
                    self._release(out, start)
                    self._fenced = run - j
                    self._mark = j - start
                    self._lead = -1
                    return True
                self._backticks(run - j)
                pos = run
                continue
            if self._fence or self._inline:
                pos = j + 1
                continue
            if j + 1 == len(buf):
                if ch in BY_FIRST:
                    self._release(out, self._cut(j))
                    return False  # the next character decides
                pos = j + 1
                continue
            found = self._marker_at(out, j)
            if found is not None:
                return found
            pos = j + 1

    def _marker_at(self, out: list[Piece], j: int) -> bool | None:
        """At `j` (not the buffer's last character): a marker opened (True), a marker's start
        held (False), or no marker (None)."""
        buf = self._buf
        for marker in BY_TWO.get(buf[j : j + 2], ()):
            if marker.kind == "candidate" and not self._calls:
                continue
            if buf.startswith(marker.text, j):
                self._open_at(out, marker, j)
                return True
            if len(buf) - j < len(marker.text) and marker.text.startswith(buf[j:]):
                self._release(out, self._cut(j))
                return False
        single = SINGLE.get(buf[j])
        if single is not None and self._calls:
            self._open_at(out, single, j)
            return True
        return None

    def _open_at(self, out: list[Piece], marker: Marker, j: int) -> None:
        start = self._cut(j)
        self._release(out, start)
        self._begin(marker, j - start)

    def _begin(self, marker: Marker, at: int) -> None:
        """A marker at `at` in the buffer; a candidate starts at the buffer's start."""
        self._lead = -1
        end = at + len(marker.text)
        if marker.kind == "frame":
            self._buf = self._buf[end:]
            if marker.text in ("</think>", "</seed:think>"):
                self._at_start = True  # what follows is the answer: a call may start it
        elif marker.kind == "think":
            self._buf = self._buf[end:]
            self._think = marker
        else:
            self._open = marker
            self._mark = at
            self._confirmed = marker.viable is None
            self._tag_from = end
            self._balance = _Balance()
            self._joined = 0

    def _backticks(self, run: int) -> None:
        if self._fence:
            if run >= self._fence:
                self._fence = 0
        elif self._inline:
            if run == self._inline:
                self._inline = 0
        elif run >= 3:
            self._fence = run
        else:
            self._inline = run

    def _not_markup(self, out: list[Piece]) -> bool:
        """The open candidate is prose after all: show up to its first character, rescan."""
        self._release(out, self._mark + 1)
        self._open = self._balance = None
        self._fenced = 0
        return True

    def _markup_step(self, out: list[Piece]) -> bool:
        """Advance an open candidate: complete (True), plausible (False), or prose (True)."""
        marker = self._open
        assert marker is not None and self._balance is not None
        buf = self._buf
        at = self._mark
        head = at + len(marker.text)
        if not self._confirmed and marker.viable is not None:
            verdict = marker.viable(buf[head:])
            if verdict is False:
                return self._not_markup(out)
            self._confirmed = verdict is True
        if marker.kind == "header":
            return self._header(out, marker, at, head)
        if marker.end_tag is not None:
            k = buf.find(marker.end_tag, max(self._tag_from, head))
            if k < 0:
                self._tag_from = max(head, len(buf) - len(marker.end_tag) + 1)
                return False
            end = k + len(marker.end_tag)
        else:
            found = self._balanced(marker, buf, at, head)
            if found is None:
                return False
            end = found
        out.append(Markup(marker.format, buf[:end]))
        self._buf = buf[end:]
        self._open = self._balance = None
        self._joined = 0
        return True

    def _balanced(self, marker: Marker, buf: str, at: int, head: int) -> int | None:
        """Where a bracketed candidate ends (None: not yet), following `;` chains."""
        assert self._balance is not None
        while True:
            if self._joined:
                end = self._joined
            else:
                if marker.from_opener:
                    start = at
                elif marker.body_at is not None:
                    body = marker.body_at(buf[at:])
                    if body is None:
                        return None
                    start = at + body
                else:
                    start = head
                found = self._balance.end(buf, start)
                if found is None:
                    return None
                end = found
            if not marker.chain:
                return end
            rest = buf[end:]
            stripped = rest.lstrip()
            if not stripped:
                self._joined = end
                return None  # another part may follow
            if stripped[0] != ";":
                return end
            self._joined = 0
            self._balance = _Balance(end + len(rest) - len(stripped) + 1)

    def _header(self, out: list[Piece], marker: Marker, at: int, head: int) -> bool:
        """A harmony header: a call (`to=`), reasoning (`analysis`) or the answer."""
        buf = self._buf
        k = buf.find(_MESSAGE, head)
        if k < 0:
            if len(buf) - head > _HEADER_LIMIT:
                return self._not_markup(out)
            return False
        header = buf[at : k + len(_MESSAGE)]
        if " to=" in header or header.startswith("<|start|>assistant to="):
            self._open = HARMONY_CALL if self._calls else None
            if self._open is None:
                return self._not_markup(out)
            self._tag_from = k + len(_MESSAGE)
            self._confirmed = True
            return True
        self._buf = buf[k + len(_MESSAGE) :]
        self._open = self._balance = None
        if "<|channel|>analysis" in header:
            self._think = HARMONY_ANALYSIS
        return True

    def _think_step(self, out: list[Piece]) -> bool:
        """Inside reasoning: release it as `Reasoning` up to the tag that ends it."""
        marker = self._think
        assert marker is not None
        buf = self._buf
        best = -1
        tag = ""
        for candidate in (*marker.close, *marker.stops):
            k = buf.find(candidate)
            if k >= 0 and (best < 0 or k < best):
                best, tag = k, candidate
        if best >= 0:
            if best:
                out.append(Reasoning(buf[:best]))
            consumed = len(tag) if tag in marker.close else 0
            self._buf = buf[best + consumed :]
            self._think = None
            self._at_start = True
            return True
        keep = 0
        longest = max(len(t) for t in (*marker.close, *marker.stops))
        lt = buf.rfind("<", max(0, len(buf) - longest + 1))
        if lt >= 0 and any(t.startswith(buf[lt:]) for t in (*marker.close, *marker.stops)):
            keep = len(buf) - lt
        if len(buf) > keep:
            out.append(Reasoning(buf[: len(buf) - keep]))
            self._buf = buf[len(buf) - keep :]
        return False

    def _fence_step(self, out: list[Piece]) -> bool:
        """A fenced block that may hold a call: complete (True), plausible (False), or code
        (True: its fence opens and it is shown)."""
        buf = self._buf
        at, run = self._mark, self._fenced
        text = buf[at + run :]
        newline = text.find("\n")
        if newline < 0:
            lang = text.strip().lower()
            if len(text) < 20 and any(known.startswith(lang) for known in FENCE_LANGS):
                return False
            return self._code_fence(out)
        if text[:newline].strip().lower() not in FENCE_LANGS:
            return self._code_fence(out)
        body = text[newline + 1 :]
        stripped = body.lstrip()
        if not stripped:
            return False
        if stripped[0] == "{":
            verdict = key_viable(stripped[1:])
        elif stripped[0] == "[":
            verdict = list_viable(stripped[1:])
        else:
            verdict = False
        if verdict is False:
            return self._code_fence(out)
        close = body.find("`" * run)
        if close < 0:
            return False
        end = at + run + newline + 1 + close + run
        while end < len(buf) and buf[end] == "`":
            end += 1
        if end == len(buf):
            return False  # the closing run may grow
        out.append(Markup("fenced_json", buf[:end]))
        self._buf = buf[end:]
        self._fenced = 0
        return True

    def _code_fence(self, out: list[Piece]) -> bool:
        self._release(out, self._mark + self._fenced)
        self._fence = self._fenced
        self._fenced = 0
        return True

    def _release(self, out: list[Piece], upto: int) -> None:
        if upto > 0:
            self._lead = -1
            if out and isinstance(out[-1], str):
                out[-1] += self._buf[:upto]
            else:
                out.append(self._buf[:upto])
            self._buf = self._buf[upto:]


def _merge(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for piece in pieces:
        last = out[-1] if out else None
        if isinstance(piece, str) and isinstance(last, str):
            out[-1] = last + piece
        elif isinstance(piece, Reasoning) and isinstance(last, Reasoning):
            out[-1] = Reasoning(last.text + piece.text)
        elif piece != "":
            out.append(piece)
    return out
