"""What a model is shown, as text, for a content part its wire cannot carry as such.

`as_text(part)` renders any `ToolContent` as one string: text as it is, embedded resource
text inside a `<resource uri=...>` tag, and a short bracketed note for what is never pasted
into a prompt (an image the model does not take, an embedded binary document, a link, an
edit, a terminal). The wires (`openai_wire.py`, `anthropic_wire.py`) use it wherever their
API takes only text: a system prompt, a tool result, a part the model does not accept.
Pure: no I/O.
"""

from __future__ import annotations

from steerable_bridge.runtime.values import (
    DiffContent,
    ImagePart,
    ResourcePart,
    TerminalContent,
    TextPart,
    ToolContent,
)

__all__ = ["as_text"]


def as_text(part: ToolContent) -> str:
    """A text rendering of any content part, for places that only take text."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ImagePart):
        return f"[image {part.uri or ''} ({part.mime_type}) not shown to this model]"
    if isinstance(part, ResourcePart):
        if part.text is not None:
            return f'<resource uri="{part.uri}">\n{part.text}\n</resource>'
        if part.uri.startswith("data:"):  # never paste an embedded binary into the prompt
            kind = part.mime_type or "binary"
            return f"[document {part.name or ''} ({kind}) not shown to this model]"
        return f"[resource {part.name or ''} {part.uri}]".replace("  ", " ")
    if isinstance(part, DiffContent):
        action = "created" if part.old_text is None else "edited"
        return f"[{action} {part.path}]"
    if isinstance(part, TerminalContent):
        return f"[terminal {part.terminal_id}]"
    raise TypeError(f"unknown content part {type(part).__name__}")
