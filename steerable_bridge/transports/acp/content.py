"""ACP prompt content blocks → the runtime's message content parts.

`prompt_parts(blocks, ...)` turns a `session/prompt`'s blocks into `ContentPart`s: text as
text; `image` as an `ImagePart` when the model takes images, else a note saying so (never a
silent drop); embedded `resource` text as a `ResourcePart` with its text; `resource_link`
read through the client's `fs/read_text_file` when the client offers it, else from disk
inside the session's working directory (anything outside it, or unreadable, stays a link
plus a note that says why). An embedded PDF becomes a `ResourcePart` with a base64
`data:application/pdf` URI (its original uri as the name) when the model reads documents;
other binary blobs, and PDFs for models that do not, and audio become notes. Every read is
bounded, and a link to a FIFO or device is refused before it is read.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Awaitable, Callable, Sequence
from urllib.parse import unquote, urlparse

import anyio
from acp import RequestError
from acp import schema as acp

from steerable_bridge.runtime.values import ContentPart, ImagePart, ResourcePart, TextPart

__all__ = ["MAX_RESOURCE_BYTES", "PromptBlock", "ReadText", "prompt_parts"]

log = logging.getLogger("steerable_bridge.acp")

MAX_RESOURCE_BYTES = 1_000_000
READ_TIMEOUT_S = 15.0

PromptBlock = (
    acp.TextContentBlock
    | acp.ImageContentBlock
    | acp.AudioContentBlock
    | acp.ResourceContentBlock
    | acp.EmbeddedResourceContentBlock
)

ReadText = Callable[[str], Awaitable[str]]
"""Reads a file through the client (`fs/read_text_file`), given an absolute path."""


def _path_of(uri: str) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if not parsed.scheme and uri.startswith("/"):
        return uri
    return None


async def _read_disk(path: str, cwd: str) -> str:
    with anyio.fail_after(READ_TIMEOUT_S):
        resolved = await anyio.Path(path).resolve()
        root = await anyio.Path(cwd).resolve()
        if not resolved.is_relative_to(root):
            raise ValueError(f"{path} is outside the session's working directory {cwd}")
        data = await anyio.to_thread.run_sync(_read_regular, str(resolved))
    return data.decode("utf-8", errors="replace")


def _read_regular(path: str) -> bytes:
    """A regular file's bytes, at most `MAX_RESOURCE_BYTES`: a FIFO or device is refused
    before it is read (opened with `O_NONBLOCK`, so even opening one cannot block), and a
    large file before its bytes are held."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path} is not a regular file (a FIFO, socket or device)")
        data = b"" if info.st_size > MAX_RESOURCE_BYTES else handle.read(MAX_RESOURCE_BYTES + 1)
    if info.st_size > MAX_RESOURCE_BYTES or len(data) > MAX_RESOURCE_BYTES:
        raise ValueError(f"{path} is larger than {MAX_RESOURCE_BYTES} bytes")
    return data


async def _link(
    block: acp.ResourceContentBlock, *, cwd: str, read_text: ReadText | None
) -> list[ContentPart]:
    link = ResourcePart(uri=block.uri, name=block.name, mime_type=block.mime_type)
    path = _path_of(block.uri)
    if path is None:
        return [link]
    try:
        if read_text is not None:
            with anyio.fail_after(READ_TIMEOUT_S):
                text = await read_text(path)
        else:
            text = await _read_disk(path, cwd)
    except (OSError, ValueError, TimeoutError, RequestError, ConnectionError) as error:
        log.info("could not read %s for the prompt: %s", block.uri, error)
        note = f"[the attached {block.uri} could not be read: {error}]"
        return [link, TextPart(text=note)]
    return [ResourcePart(uri=block.uri, text=text, name=block.name, mime_type=block.mime_type)]


def _image(
    data: str, mime_type: str, uri: str | None, *, accepts_images: bool, route: str
) -> ContentPart:
    if accepts_images:
        return ImagePart(data=data, mime_type=mime_type, uri=uri)
    return TextPart(
        text=f"[an image ({mime_type}) was attached, but the model {route} cannot take images;"
        " it was left out. Switch to a model that reads images with /model to include it]"
    )


async def prompt_parts(
    blocks: Sequence[PromptBlock],
    *,
    cwd: str,
    read_text: ReadText | None,
    accepts_images: bool,
    route: str,
    accepts_documents: bool = False,
) -> tuple[ContentPart, ...]:
    """The content of one prompt, in block order."""
    parts: list[ContentPart] = []
    for block in blocks:
        if isinstance(block, acp.TextContentBlock):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, acp.ImageContentBlock):
            parts.append(
                _image(
                    block.data,
                    block.mime_type,
                    block.uri,
                    accepts_images=accepts_images,
                    route=route,
                )
            )
        elif isinstance(block, acp.ResourceContentBlock):
            parts.extend(await _link(block, cwd=cwd, read_text=read_text))
        elif isinstance(block, acp.EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, acp.TextResourceContents):
                parts.append(
                    ResourcePart(uri=resource.uri, text=resource.text, mime_type=resource.mime_type)
                )
            elif (resource.mime_type or "").startswith("image/"):
                parts.append(
                    _image(
                        resource.blob,
                        resource.mime_type or "image/png",
                        resource.uri,
                        accepts_images=accepts_images,
                        route=route,
                    )
                )
            elif resource.mime_type == "application/pdf" and accepts_documents:
                parts.append(
                    ResourcePart(
                        uri=f"data:application/pdf;base64,{resource.blob}",
                        mime_type="application/pdf",
                        name=resource.uri,
                    )
                )
            else:
                pdf = resource.mime_type == "application/pdf"
                parts.append(
                    TextPart(
                        text=f"[the attached binary resource {resource.uri}"
                        f" ({resource.mime_type or 'unknown type'}) was left out:"
                        + (
                            f" the model {route} does not read PDF documents; switch to one"
                            " that does (an anthropic: route) with /model to include it]"
                            if pdf
                            else " only text resources, images and PDFs can be passed to the model]"
                        )
                    )
                )
        else:
            parts.append(
                TextPart(
                    text="[an audio clip was attached; this agent does not take audio, so it was"
                    " left out]"
                )
            )
    return tuple(parts)
