"""A streaming stripper that finds tool-call markup in model text, split however it arrives.

Models served without a tool parser write their calls as text (`<tool_call>{...}</tool_call>`,
`<function=NAME>`, DeepSeek's `tool-calls-begin` tokens, MiniMax `<invoke>`, Mistral
`[TOOL_CALLS]`, Llama's `<|python_tag|>`, `[Tool call: NAME(...)]`) or answer with nothing
but a call (a bare JSON object, a pythonic `[fn(a=1)]` list, a fenced ```json block).
`MarkupStripper.feed(delta)` returns what may be shown now, as text pieces and `Markup`
pieces (a complete candidate and its format); `finish()` flushes at the end of the stream.

It holds back only what may still become markup: a tail that is a prefix of an opening
marker, an open candidate that is still plausible, a run of backticks that may grow, and,
at the very start of a reply, text that may turn out to be a whole-reply call. Everything
else is released at once, byte for byte. Markup inside code (a fence or an inline span) is
prose, never a candidate. Whether a candidate really is a call (an offered tool, valid
arguments) is for the caller to decide (`pseudo_calls.py`); when it is not, the caller shows
its text unchanged. Written by hand because no library parses these formats incrementally.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "DS_CALLS_BEGIN",
    "DS_CALLS_END",
    "DS_CALL_BEGIN",
    "DS_CALL_END",
    "DS_SEP",
    "Markup",
    "MarkupStripper",
    "Piece",
]


def _ds(word: str) -> str:
    """A DeepSeek special token: full-width bars around words joined by U+2581."""
    return "<\uff5c" + word.replace(" ", "\u2581") + "\uff5c>"


DS_CALLS_BEGIN = _ds("tool calls begin")
DS_CALLS_END = _ds("tool calls end")
DS_CALL_BEGIN = _ds("tool call begin")
DS_CALL_END = _ds("tool call end")
DS_SEP = _ds("tool sep")


@dataclass(frozen=True, slots=True)
class Markup:
    """A complete candidate: its format name and its exact text."""

    format: str
    raw: str


Piece = str | Markup

_NAME = re.compile(r"[A-Za-z0-9_.\-]*")
_CALL_KEYS = ("name", "function", "tool", "tool_name", "arguments", "parameters", "type", "id")
_FENCE_LANGS = frozenset({"", "json", "tool_call", "tool_code", "python", "py"})


class _Balance:
    """Incremental bracket matching over (), [], {} that skips quoted strings."""

    __slots__ = ("depth", "escape", "pos", "quote", "started")

    def __init__(self) -> None:
        self.depth = 0
        self.quote = ""
        self.escape = False
        self.pos = 0
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


# -- markers found anywhere outside code ---------------------------------------------------


def _after(text: str, opener: str) -> str:
    return text[len(opener) :]


def _json_start(rest: str) -> bool | None:
    rest = rest.lstrip()
    return None if not rest else rest[0] in "{["


def _name_then(close: str) -> Callable[[str], bool | None]:
    """A name, then `close` (`<function=NAME>`, `[Tool call: NAME(`)."""

    def viable(rest: str) -> bool | None:
        rest = rest.lstrip() if close == "(" else rest
        m = _NAME.match(rest)
        end = m.end() if m else 0
        if end == len(rest):
            return None
        tail = rest[end:].lstrip() if close == "(" else rest[end:]
        if not tail:
            return None if end > 0 else False
        return end > 0 and tail[0] == close

    return viable


def _mistral(rest: str) -> bool | None:
    stripped = rest.lstrip()
    if not stripped:
        return None
    return True if stripped[0] in "[{" else _name_then("[")(stripped)


def _quoted(rest: str) -> bool | None:
    return None if not rest else rest[0] in "\"'"


def _anything(rest: str) -> bool | None:
    return True


@dataclass(frozen=True, slots=True)
class _Opener:
    text: str
    format: str
    viable: Callable[[str], bool | None]
    """What follows the opener: True is markup, False is not, None cannot tell yet."""
    end_tag: str | None = None
    """The candidate ends after this tag; None: after the balanced bracket that follows."""
    from_opener: bool = False
    """Balance from the opener's own bracket (`[Tool call: ...]`)."""
    body_at: Callable[[str], int | None] | None = None
    """Where the balanced part starts in the candidate (None: not known yet); default:
    right after the opener."""


def _mistral_body(text: str) -> int | None:
    """`[TOOL_CALLS][...]` balances from the list; `[TOOL_CALLS]name[ARGS]{...}` after ARGS."""
    opener = len("[TOOL_CALLS]")
    if text[opener:].lstrip()[:1] in ("[", "{"):
        return opener
    at = text.find("[ARGS]", opener)
    return None if at < 0 else at + len("[ARGS]")


_OPENERS: tuple[_Opener, ...] = (
    _Opener("<tool_call>", "hermes", _json_start, "</tool_call>"),
    _Opener("<function=", "function_tag", _name_then(">"), "</function>"),
    _Opener(DS_CALLS_BEGIN, "deepseek", _anything, DS_CALLS_END),
    _Opener(DS_CALL_BEGIN, "deepseek", _anything, DS_CALL_END),
    _Opener("<minimax:tool_call>", "minimax", _anything, "</minimax:tool_call>"),
    _Opener("<invoke name=", "minimax", _quoted, "</invoke>"),
    _Opener("[TOOL_CALLS]", "mistral", _mistral, body_at=_mistral_body),
    _Opener("<|python_tag|>", "python_tag", _json_start),
    _Opener("[Tool call:", "markdown", _name_then("("), from_opener=True),
)
_BY_FIRST: dict[str, tuple[_Opener, ...]] = {
    c: tuple(o for o in _OPENERS if o.text[0] == c) for c in {o.text[0] for o in _OPENERS}
}
_INTEREST = re.compile(r"[<\[`\n]")
_may_open = re.compile("<(?:[tfmi|\uff5c]|$)|\\[(?:T|$)|`").search
"""Where markup or code may start: `<` or `[` followed by the second character of an
opener (or by the end of the delta), or a backtick. Checked against `_OPENERS` in tests."""


# -- whole-reply candidates ----------------------------------------------------------------


def _key_plausible(text: str) -> bool:
    """After `{`: the first key may still be one a call object starts with."""
    rest = text.lstrip()
    if not rest:
        return True
    if rest[0] != '"':
        return False
    close = rest.find('"', 1)
    key = rest[1:] if close < 0 else rest[1:close]
    if close < 0:
        return any(k.startswith(key) for k in _CALL_KEYS)
    return key in _CALL_KEYS


_PYTHONIC_HEAD = re.compile(r"\[\s*([A-Za-z_][\w.]*)?\s*(\()?")


def _list_plausible(text: str) -> bool:
    """`[` then a JSON object of a call, or `name(` of a pythonic call."""
    rest = text[1:].lstrip()
    if not rest:
        return True
    if rest[0] == "{":
        return _key_plausible(rest[1:])
    m = _PYTHONIC_HEAD.match(text)
    if m is None:
        return False
    if m.group(2):
        return True
    return m.end() == len(text) and m.group(1) is not None


class MarkupStripper:
    """Splits a stream of model text into prose and markup candidates; see module doc."""

    def __init__(self, *, whole_reply: bool = True) -> None:
        self._buf = ""
        self._fence = 0  # length of the open fence's backtick run, 0 when none
        self._inline = 0  # length of the open inline span's backtick run
        self._open: _Opener | None = None
        self._balance: _Balance | None = None
        self._tag_from = 0
        self._confirmed = False
        self._whole: str | None = None  # "json", "list" or "fence" while a reply may be a call
        self._at_start = whole_reply
        self._idle = not whole_reply
        """Nothing held, no open candidate, not in code, past the start: plain text passes."""

    # -- public ---------------------------------------------------------------------------

    def plain(self, delta: str) -> bool:
        """True when `delta` may be shown as it is and leaves the state unchanged (the
        common case: prose while nothing is held); then `feed` need not be called."""
        return self._idle and (
            ("<" not in delta and "[" not in delta and "`" not in delta) or _may_open(delta) is None
        )

    def feed(self, delta: str) -> list[Piece]:
        """Add text; returns what can be decided now, in order."""
        if not delta:
            return []
        if self.plain(delta):
            return [delta]
        self._buf += delta
        out: list[Piece] = []
        self._scan(out)
        self._idle = not (self._buf or self._open or self._at_start or self._fence or self._inline)
        return out

    def finish(self) -> list[Piece]:
        """The end of the stream: flush whatever is held."""
        out: list[Piece] = []
        buf, self._buf = self._buf, ""
        if self._whole is not None and buf.strip():
            out.append(Markup(_WHOLE_FORMAT[self._whole], buf))
        elif self._open is not None:
            out.append(Markup(self._open.format, buf))
        elif buf:
            out.append(buf)
        self._open = self._balance = None
        self._whole = None
        self._idle = not (self._at_start or self._fence or self._inline)
        return _merge(out)

    # -- scanning -------------------------------------------------------------------------

    def _scan(self, out: list[Piece]) -> None:
        while self._buf:
            if self._at_start and not self._start(out):
                return
            if self._whole is not None:
                if not self._whole_step(out):
                    return
                continue
            if self._open is not None:
                if not self._markup_step(out):
                    return
                continue
            if not self._prose_step(out):
                return

    def _start(self, out: list[Piece]) -> bool:
        """At the start of the reply: may the text be a whole-reply call? False: hold."""
        buf = self._buf
        stripped = buf.lstrip()
        if not stripped:
            return False  # only whitespace so far: hold it
        first = stripped[0]
        self._at_start = False
        if first == "{":
            self._whole = "json"
        elif first == "[":
            head = stripped[: len("[TOOL_CALLS]")]
            markers = [o.text for o in _BY_FIRST["["]]
            if any(head.startswith(m) for m in markers):
                return True  # a marker: prose scanning finds it
            if any(m.startswith(stripped) for m in markers):
                self._at_start = True
                return False  # may still become a marker
            self._whole = "list"
        elif first == "`":
            if stripped.startswith("```"):
                self._whole = "fence"
            elif stripped == "`" * len(stripped):
                self._at_start = True
                return False
        return True

    def _whole_step(self, out: list[Piece]) -> bool:
        """Keep holding a plausible whole-reply call (False); or give it up as prose."""
        kind = self._whole
        lead = len(self._buf) - len(self._buf.lstrip())
        text = self._buf[lead:]
        if kind == "fence":
            plausible = self._fence_plausible(text)
        else:
            if self._balance is None:
                self._balance = _Balance()
            end = self._balance.end(text)
            if end is None:
                plausible = _key_plausible(text[1:]) if kind == "json" else _list_plausible(text)
            else:
                plausible = not text[end:].strip()
        if plausible:
            return False
        self._whole = None
        self._balance = None
        return True  # rescan the same text as prose

    @staticmethod
    def _fence_plausible(text: str) -> bool:
        newline = text.find("\n")
        if newline < 0:
            return text[3:].strip().lower() in _FENCE_LANGS or _lang_prefix(text[3:])
        if text[3:newline].strip().lower() not in _FENCE_LANGS:
            return False
        body = text[newline + 1 :]
        start = body.lstrip()
        if start and start[0] not in "{[" and not start.startswith("`"):
            return False
        close = body.find("```")
        return close < 0 or not body[close + 3 :].strip()

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
                    self._release(out, j)
                    return False  # the run may grow
                self._backticks(run - j)
                pos = run
                continue
            if self._fence or self._inline:
                pos = j + 1
                continue
            partial = False
            for opener in _BY_FIRST.get(ch, ()):
                if buf.startswith(opener.text, j):
                    self._release(out, j)
                    self._open = opener
                    self._confirmed = False
                    self._tag_from = len(opener.text)
                    self._balance = _Balance()
                    return True
                if len(buf) - j < len(opener.text) and opener.text.startswith(buf[j:]):
                    partial = True
            if partial:
                self._release(out, j)
                return False
            pos = j + 1

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

    def _markup_step(self, out: list[Piece]) -> bool:
        """Advance an open candidate: complete (True), plausible (False), or prose (True)."""
        opener = self._open
        assert opener is not None and self._balance is not None
        buf = self._buf
        if not self._confirmed:
            verdict = opener.viable(_after(buf, opener.text))
            if verdict is False:
                out.append(buf[0])  # not markup after all: show the first character, rescan
                self._buf = buf[1:]
                self._open = self._balance = None
                return True
            self._confirmed = verdict is True
        if opener.end_tag is not None:
            at = buf.find(opener.end_tag, max(self._tag_from, len(opener.text)))
            if at < 0:
                self._tag_from = max(len(opener.text), len(buf) - len(opener.end_tag) + 1)
                return False
            end = at + len(opener.end_tag)
        else:
            default = 0 if opener.from_opener else len(opener.text)
            start = opener.body_at(buf) if opener.body_at is not None else default
            if start is None:
                return False
            found = self._balance.end(buf, start)
            if found is None:
                return False
            end = found
        out.append(Markup(opener.format, buf[:end]))
        self._buf = buf[end:]
        self._open = self._balance = None
        return True

    def _release(self, out: list[Piece], upto: int) -> None:
        if upto > 0:
            if out and isinstance(out[-1], str):
                out[-1] += self._buf[:upto]
            else:
                out.append(self._buf[:upto])
            self._buf = self._buf[upto:]


_WHOLE_FORMAT = {"json": "bare_json", "list": "pythonic", "fence": "fenced_json"}


def _lang_prefix(text: str) -> bool:
    word = text.strip().lower()
    return any(lang.startswith(word) for lang in _FENCE_LANGS)


def _merge(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and out and isinstance(out[-1], str):
            out[-1] += piece
        elif piece != "":
            out.append(piece)
    return out
