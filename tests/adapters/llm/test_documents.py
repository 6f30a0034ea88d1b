"""Documents reach the model as documents: an editor's embedded PDF becomes a base64 PDF
`document` block on `anthropic:` routes (and a note elsewhere), a PDF link a URL document,
embedded text a text document — and no route ever pastes base64 into the prompt text."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import schema as acp

from steerable_bridge.adapters.llm.anthropic import AnthropicConfig, AnthropicProvider
from steerable_bridge.adapters.llm.openai_wire import request_body as openai_body
from steerable_bridge.runtime.ports.model import ModelRequest
from steerable_bridge.runtime.values import Message, ResourcePart, TextPart
from steerable_bridge.transports.acp.content import prompt_parts

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

PDF = acp.EmbeddedResourceContentBlock(
    type="resource",
    resource=acp.BlobResourceContents(
        uri="file:///specs/paper.pdf", blob="JVBERi0xLjQ=", mime_type="application/pdf"
    ),
)


def request(*parts: TextPart | ResourcePart) -> ModelRequest:
    return ModelRequest(
        model="m", system="", messages=(Message(id="u", role="user", content=parts),)
    )


async def test_an_embedded_pdf_becomes_a_base64_document_on_anthropic_routes(
    tmp_path: Path,
) -> None:
    anthropic = AnthropicProvider(AnthropicConfig(model="m"))
    assert anthropic.info.accepts_documents
    parts = await prompt_parts(
        [acp.TextContentBlock(type="text", text="summarise"), PDF],
        cwd=str(tmp_path),
        read_text=None,
        accepts_images=True,
        route="anthropic:m",
        accepts_documents=anthropic.info.accepts_documents,
    )
    assert parts[1] == ResourcePart(
        uri="data:application/pdf;base64,JVBERi0xLjQ=",
        mime_type="application/pdf",
        name="file:///specs/paper.pdf",
    )
    content = anthropic.body(request(*parts))["messages"][0]["content"]
    assert content[1] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="},
        "title": "file:///specs/paper.pdf",
        "cache_control": {"type": "ephemeral"},
    }

    text = openai_body(request(*parts), model="m", accepts_images=True)["messages"][0]["content"]
    assert "JVBERi0" not in str(text) and "paper.pdf" in str(text)


async def test_a_pdf_for_a_model_without_documents_is_a_note_naming_the_remedy(
    tmp_path: Path,
) -> None:
    (note,) = await prompt_parts(
        [PDF], cwd=str(tmp_path), read_text=None, accepts_images=True, route="openai:m"
    )
    assert isinstance(note, TextPart)
    assert "openai:m does not read PDF documents" in note.text and "/model" in note.text


def test_pdf_links_and_embedded_text_are_documents_too() -> None:
    link = ResourcePart(uri="https://example.com/a.pdf", mime_type="application/pdf")
    text = ResourcePart(uri="file:///notes.md", text="# Notes", mime_type="text/markdown")
    other = ResourcePart(uri="https://example.com/page", name="page")
    body = AnthropicProvider(AnthropicConfig(model="m")).body(request(link, text, other))
    first, second, third = body["messages"][0]["content"]
    assert first == {
        "type": "document",
        "source": {"type": "url", "url": "https://example.com/a.pdf"},
        "title": "https://example.com/a.pdf",
    }
    assert second["source"] == {"type": "text", "media_type": "text/plain", "data": "# Notes"}
    assert third["type"] == "text" and "https://example.com/page" in third["text"]
