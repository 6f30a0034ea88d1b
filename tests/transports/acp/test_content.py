"""ACP prompt blocks → content parts, without a process: notes instead of silent drops."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from acp import schema as acp

from steerable_bridge.runtime.values import ImagePart, ResourcePart, TextPart
from steerable_bridge.transports.acp.content import MAX_RESOURCE_BYTES, prompt_parts

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]


async def test_binary_blobs_and_audio_become_notes_and_image_blobs_images(tmp_path: Path) -> None:
    blocks = [
        acp.EmbeddedResourceContentBlock(
            type="resource",
            resource=acp.BlobResourceContents(
                uri="file:///a.zip", blob="UEsDBA==", mime_type="application/zip"
            ),
        ),
        acp.EmbeddedResourceContentBlock(
            type="resource",
            resource=acp.BlobResourceContents(
                uri="file:///p.png", blob="iVBORw==", mime_type="image/png"
            ),
        ),
        acp.AudioContentBlock(type="audio", data="AAAA", mime_type="audio/wav"),
    ]
    parts = await prompt_parts(
        blocks, cwd=str(tmp_path), read_text=None, accepts_images=True, route="scripted:x"
    )
    zip_note, image, audio_note = parts
    assert isinstance(zip_note, TextPart) and "application/zip" in zip_note.text
    assert image == ImagePart(data="iVBORw==", mime_type="image/png", uri="file:///p.png")
    assert isinstance(audio_note, TextPart) and "audio" in audio_note.text


async def test_links_that_cannot_be_read_stay_links_with_the_reason(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (MAX_RESOURCE_BYTES + 1))
    blocks = [
        acp.ResourceContentBlock(type="resource_link", uri=big.as_uri(), name="big.txt"),
        acp.ResourceContentBlock(
            type="resource_link", uri=(tmp_path / "gone.txt").as_uri(), name="gone"
        ),
        acp.ResourceContentBlock(type="resource_link", uri="https://example.com/x", name="web"),
    ]
    parts = await prompt_parts(
        blocks, cwd=str(tmp_path), read_text=None, accepts_images=False, route="demo:default"
    )
    big_link, big_note, gone_link, gone_note, web = parts
    assert isinstance(big_link, ResourcePart) and big_link.text is None
    assert isinstance(big_note, TextPart) and "larger than" in big_note.text
    assert isinstance(gone_link, ResourcePart) and gone_link.text is None
    assert isinstance(gone_note, TextPart) and "could not be read" in gone_note.text
    assert web == ResourcePart(uri="https://example.com/x", name="web")


async def test_a_link_to_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)  # nobody writes to it: opening it for reading would wait for ever
    blocks = [acp.ResourceContentBlock(type="resource_link", uri=pipe.as_uri(), name="pipe")]
    parts = await prompt_parts(
        blocks, cwd=str(tmp_path), read_text=None, accepts_images=False, route="demo:default"
    )
    link, note = parts
    assert isinstance(link, ResourcePart) and link.text is None
    assert isinstance(note, TextPart) and "not a regular file" in note.text
