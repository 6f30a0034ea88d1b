"""Recognise a model server's "the prompt does not fit the context window" answer.

OpenAI and vLLM answer HTTP 400 with `code: context_length_exceeded` or "This model's
maximum context length is N tokens"; llama.cpp says `exceed_context_size_error` / "the
request exceeds the available context size"; Ollama, LM Studio and proxies word it in
their own ways. `is_context_overflow(status, body)` looks at the error's code, type and
message and answers whether the loop should compact and retry (`CONTEXT_OVERFLOW`) rather
than fail with a generic `bad_request`. Pure; used by the OpenAI-compatible adapter.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["is_context_overflow"]

_CODES = frozenset(
    {
        "context_length_exceeded",
        "exceed_context_size_error",
        "context_window_exceeded",
        "string_above_max_length",
        "request_too_large",
    }
)

_MESSAGE = re.compile(
    r"maximum context length"
    r"|context[ _-]?(length|window|size)[ _-]?(exceeded|is exceeded|overflow)"
    r"|exceeds? (the )?(available |model'?s? )?(context|max(imum)? (context|sequence))"
    r"|(prompt|input)( is)? too long"
    r"|too many (input )?tokens"
    r"|longer than the model'?s context"
    r"|context overflow"
    r"|keep the first \d+ tokens when context"
    r"|reduce the length of the (messages|prompt)",
    re.IGNORECASE,
)


def is_context_overflow(status: int, body: Any) -> bool:
    """True when an error answer (HTTP `status`, decoded `body`) says the prompt is too big."""
    if status not in (400, 413, 422, 500) and status != 0:
        return False
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str) and value.lower() in _CODES:
                return True
        message = error.get("message") or error.get("detail") or ""
    else:
        message = error
    return bool(_MESSAGE.search(str(message)))
