"""A bridged agent's v1.25 compaction updates, read off the wire, become our compaction events."""

from __future__ import annotations

from typing import Any

from steerable_bridge.runtime import events as ev
from steerable_bridge.transports.acp.bridge.compaction import (
    ChildCompaction,
    CompactionMapper,
    parse,
)


def _message(update: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": update},
    }


def _chunk(text: str) -> dict[str, Any]:
    return _message(
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "k1",
            "content": {"type": "text", "text": text},
        }
    )


def _status(status: str, **more: Any) -> dict[str, Any]:
    return _message(
        {"sessionUpdate": "compaction_update", "compactionId": "k1", "status": status, **more}
    )


def _items(*messages: dict[str, Any]) -> list[ChildCompaction]:
    out = []
    for message in messages:
        found = parse(message)
        assert found is not None and found[0] == "s1"
        out.append(found[1])
    return out


def _events(mapper: CompactionMapper, items: list[ChildCompaction]) -> list[tuple[Any, ...]]:
    return [(cls.__name__, fields) for item in items for cls, fields in mapper.update(item)]


def test_a_foreign_agents_streamed_summary_becomes_start_pieces_and_compaction() -> None:
    items = _items(_status("in_progress"), _chunk("Sum"), _chunk("mary."), _status("completed"))
    events = _events(CompactionMapper(), items)
    assert events == [
        ("CompactionStarted", {"compaction_id": "k1", "trigger": "pressure"}),
        ("CompactionSummaryDelta", {"compaction_id": "k1", "delta": "Sum"}),
        ("CompactionSummaryDelta", {"compaction_id": "k1", "delta": "mary."}),
        (
            "Compaction",
            {
                "compaction_id": "k1",
                "summary": "Summary.",
                "trigger": "pressure",
                "pre_tokens": 0,
                "post_tokens": 0,
                "turns": 0,
                "fallback": False,
            },
        ),
    ]


def test_a_first_chunk_opens_it_and_a_completed_summary_replaces_the_pieces() -> None:
    replaced = _status("completed", summary=[{"type": "text", "text": "The final summary"}])
    events = _events(CompactionMapper(), _items(_chunk("draft"), replaced))
    assert [name for name, _ in events] == [
        "CompactionStarted",
        "CompactionSummaryDelta",
        "Compaction",
    ]
    assert events[-1][1]["summary"] == "The final summary"


def test_a_failed_or_unfinished_compaction_is_dropped() -> None:
    mapper = CompactionMapper()
    failed = _events(mapper, _items(_status("in_progress"), _status("failed", error="no model")))
    assert failed[-1] == (
        "CompactionDropped",
        {"compaction_id": "k1", "reason": "failed", "detail": "no model"},
    )
    _events(mapper, _items(_status("in_progress"), _chunk("half")))
    (dropped,) = mapper.close()  # the prompt ended with it still open
    assert dropped[0] is ev.CompactionDropped and dropped[1]["reason"] == "failed"
    assert mapper.close() == []


def test_other_messages_and_malformed_updates_are_not_compactions() -> None:
    assert parse({"jsonrpc": "2.0", "method": "session/prompt", "id": 1, "params": {}}) is None
    text = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}}
    assert parse(_message(text)) is None
    assert parse(_message({"sessionUpdate": "compaction_update", "compactionId": "k1"})) is None
