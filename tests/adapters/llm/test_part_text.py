"""What a model reads for a content part its wire takes only as text, on every wire."""

from __future__ import annotations

import pytest

from steerable_bridge.adapters.llm.part_text import as_text
from steerable_bridge.runtime.values import (
    DiffContent,
    ImagePart,
    ResourcePart,
    TerminalContent,
    TextPart,
)


def test_text_and_embedded_text_are_passed_on_and_the_rest_is_a_short_note() -> None:
    assert as_text(TextPart(text="hi")) == "hi"
    assert as_text(ResourcePart(uri="file:///a.txt", text="body")) == (
        '<resource uri="file:///a.txt">\nbody\n</resource>'
    )
    assert as_text(ImagePart(data="AAAA", mime_type="image/png", uri="shot.png")) == (
        "[image shot.png (image/png) not shown to this model]"
    )
    binary = ResourcePart(uri="data:application/zip;base64,UEsD", name="a.zip")
    assert as_text(binary) == "[document a.zip (binary) not shown to this model]"
    assert "UEsD" not in as_text(binary)  # an embedded binary is never pasted into a prompt
    assert as_text(ResourcePart(uri="https://x.example/doc")) == "[resource https://x.example/doc]"
    assert as_text(DiffContent(path="a.py", old_text=None, new_text="x")) == "[created a.py]"
    assert as_text(DiffContent(path="a.py", old_text="x", new_text="y")) == "[edited a.py]"
    assert as_text(TerminalContent(terminal_id="t1")) == "[terminal t1]"


def test_an_unknown_part_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="unknown content part str"):
        as_text("text")  # type: ignore[arg-type]
