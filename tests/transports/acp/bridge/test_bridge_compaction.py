"""`serve --acp-agent` passes a bridged agent's streamed compaction on to the AG-UI client.

Our own ACP agent is the child; the bridge advertises `session.compaction` to it, reads its
`compaction_update` / `compaction_summary_chunk` updates off the wire (the SDK's models drop
them) and logs them as our compaction events, which AG-UI carries as CUSTOM events.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.transports.acp.bridge.harness import child_command, run_input, serving

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_a_compact_in_the_child_streams_its_summary_to_the_agui_client(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "rounds": [{"text": "first answer " * 40}],
                "summary_rounds": [{"text": "SUMMARY of the first turn", "chunk_size": 6}],
            }
        ),
        encoding="utf-8",
    )
    with serving(["--storage", "memory"], child_command(script)) as bridge:
        bridge.run(run_input("t1", "r1", "first question"))
        events = bridge.run(run_input("t1", "r2", "/compact"))  # the child's own command
    custom = [e for e in events if e["type"] == "CUSTOM" and "compaction" in e["name"]]
    names = [e["name"] for e in custom]
    assert names == [
        "steerable.compaction_started",
        *["steerable.compaction_summary_delta"] * 5,
        "steerable.compaction",
    ]
    started, *deltas, done = (e["value"] for e in custom)
    assert started["trigger"] == "manual"  # the child is ours: its _meta says so
    assert [d["delta"] for d in deltas] == ["SUMMAR", "Y of t", "he fir", "st tur", "n"]
    assert done["summary"] == "SUMMARY of the first turn" == "".join(d["delta"] for d in deltas)
    assert {started["compaction_id"], done["compaction_id"]} == {deltas[0]["compaction_id"]}
    assert events[-1]["type"] == "RUN_FINISHED"
