"""One SSE response read in batches: the `data` of every event each network read completed.

The bridge reads every event of a run, so the per-event cost of the read path is most of
what it adds to a stream. `EventSource.aiter_sse()` stacks four async generators over the
body (events ← lines ← text ← decoded bytes ← raw bytes), each resumed per line or chunk.
`sse_batches(response)` drives the same `httpx_sse` decoders (`SSELineDecoder`,
`SSEDecoder`: the library's parser, not ours) in one loop over the body and yields, per
chunk read, the `data` fields of the events it completed, in order — what `aiter_sse`
yields, minus events without data (keep-alives, `retry:` / `id:`-only blocks), which carry
no AG-UI event. The text is decoded as `aiter_text` does (the response's charset, else
UTF-8, bad bytes replaced); a compressed body (`Content-Encoding`) is read through
`aiter_bytes`, which undoes it (as it serves a body already read into memory), and an
uncompressed one straight from `aiter_raw`. An event
left unterminated when the stream ends is dropped, as the SSE spec (and `aiter_sse`) says.
No validation here (`endpoint.py`).
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncGenerator

import httpx
from httpx_sse._decoders import SSEDecoder, SSELineDecoder

__all__ = ["sse_batches"]

_IDENTITY = frozenset({"", "identity"})


async def sse_batches(response: httpx.Response) -> AsyncGenerator[list[str]]:
    """The `data` of the events each chunk of `response` completes (module docstring)."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    raw = encoding in _IDENTITY and not response.is_stream_consumed  # not read into memory
    body = response.aiter_raw() if raw else response.aiter_bytes()
    text = codecs.getincrementaldecoder(response.encoding or "utf-8")(errors="replace")
    lines = SSELineDecoder()
    events = SSEDecoder()
    async for chunk in body:
        decoded = text.decode(chunk)
        if not decoded:
            continue
        batch = [
            sse.data
            for line in lines.decode(decoded)
            if (sse := events.decode(line)) is not None and sse.data
        ]
        if batch:
            yield batch
    rest = text.decode(b"", final=True)
    tail = lines.decode(rest) if rest else []
    batch = [
        sse.data
        for line in [*tail, *lines.flush()]
        if (sse := events.decode(line)) is not None and sse.data
    ]
    if batch:
        yield batch
