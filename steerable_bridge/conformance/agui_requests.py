"""AG-UI model requests sent by reference, rebuilt and checked from their documented shape.

A CUSTOM `steerable.model_request` whose value holds `request_ref` carries only what changed
since the thread's previous request (`docs/mapping.md`): `request.messages` are the messages
after the `prefix` first ones of the request seq `base`, `request.system` / `request.tools`
are left out when they equal the base's, `messages` counts the whole request's messages,
`tokens` estimates its prompt, and `system` / `tools` are digests of the whole request's
system prompt and tools (the first 16 hex digits of a SHA-256: of the prompt's UTF-8 bytes,
and of the compact JSON `[[name, description, parameters_json], ...]`).
`rebuild(value, base)` turns such a value back into the whole event's JSON, given the
base's (whole) JSON, and checks everything it can: the base named is the one given, the
prefix fits it, the message count and both digests match what it rebuilt. It is written
from that description, not from the renderer's code, so the decoder and the stream rules
(`decode_agui.py`, `agui_rules.py`) check the renderer rather than repeat it. Raises
`ValueError` naming what does not fit; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["REF_KEY", "REQUEST", "check_reference", "is_by_reference", "rebuild"]

REQUEST = "steerable.model_request"
REF_KEY = "request_ref"
_REF_FIELDS = ("base", "prefix", "messages", "tokens", "system", "tools")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _tools_digest(tools: list[Any]) -> str:
    listed = [[t["name"], t["description"], t["parameters_json"]] for t in tools]
    return _digest(json.dumps(listed, ensure_ascii=False, separators=(",", ":")))


def _count(ref: Mapping[str, Any], name: str) -> int:
    value = ref.get(name)
    if type(value) is not int or value < 0:
        raise ValueError(f"{REF_KEY}.{name} is {value!r}, not a count")
    return value


def is_by_reference(value: object) -> bool:
    """Whether a CUSTOM `steerable.model_request` value is sent by reference."""
    return isinstance(value, Mapping) and REF_KEY in value


def check_reference(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """The value's `request_ref`, once its shape is right (what can be checked without the
    base): its fields, counts, digests, a base before the request, messages after the
    prefix that fit the count."""
    ref = value.get(REF_KEY)
    if not isinstance(ref, Mapping) or sorted(ref) != sorted(_REF_FIELDS):
        raise ValueError(f"{REF_KEY} must hold exactly {', '.join(_REF_FIELDS)}")
    base_seq, prefix = _count(ref, "base"), _count(ref, "prefix")
    total = _count(ref, "messages")
    _count(ref, "tokens")
    for name in ("system", "tools"):
        digest = ref[name]
        if not (isinstance(digest, str) and len(digest) == 16):
            raise ValueError(f"{REF_KEY}.{name} is {digest!r}, not a 16-digit digest")
    seq = value.get("seq")
    if type(seq) is not int or base_seq >= seq:
        raise ValueError(f"its base {base_seq} is not a request before it (seq {seq!r})")
    slim = value.get("request")
    if not isinstance(slim, Mapping) or not isinstance(slim.get("messages"), list):
        raise ValueError("its request holds no messages list")
    if prefix + len(slim["messages"]) != total:
        raise ValueError(
            f"its prefix {prefix} and {len(slim['messages'])} messages make no {total} messages"
        )
    return ref


def rebuild(value: Mapping[str, Any], base: Mapping[str, Any] | None) -> dict[str, Any]:
    """The whole event's JSON a by-reference value stands for (see the module docstring);
    `base` is the whole JSON of the request the thread sent before it, None when the stream
    did not carry one."""
    ref = check_reference(value)
    base_seq, prefix, total = ref["base"], ref["prefix"], ref["messages"]
    if base is None:
        raise ValueError(
            f"it refers to request seq {base_seq}, which this stream did not carry: read the"
            " thread's stream from its first run, or ask for whole requests with"
            " forwardedProps.steerable.full_requests: true"
        )
    if base.get("seq") != base_seq:
        raise ValueError(
            f"it refers to request seq {base_seq}, but the thread's previous request is seq"
            f" {base.get('seq')!r}"
        )
    old, slim = base["request"], value["request"]
    if prefix > len(old["messages"]):
        raise ValueError(f"its prefix {prefix} is longer than its base ({len(old['messages'])})")
    request = dict(slim)
    request["messages"] = [*old["messages"][:prefix], *slim["messages"]]
    request.setdefault("system", old["system"])
    request.setdefault("tools", old["tools"])
    if len(request["messages"]) != total:
        raise ValueError(f"it rebuilds {len(request['messages'])} messages, not {total}")
    if _digest(str(request["system"])) != ref["system"]:
        raise ValueError("the system prompt it rebuilds does not match its digest")
    if _tools_digest(list(request["tools"])) != ref["tools"]:
        raise ValueError("the tools it rebuilds do not match their digest")
    whole = {key: item for key, item in value.items() if key != REF_KEY}
    whole["request"] = request
    return whole
