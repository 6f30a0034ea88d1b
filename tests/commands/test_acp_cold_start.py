"""What `steerable-bridge acp` loads before it answers `initialize`.

The editor waits for that answer, so the steps `acp` takes first — parse the options, check
`--quality`, resolve the model's info, import the server — must not pull in the event
taxonomy, its JSON codec, the hooks or the quality guards (built right after the answer).
A fresh interpreter takes exactly those steps and reports which modules it holds.
(`bench/acp_cold_start.py` measures the time.)
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from steerable_bridge.cli import build_parser
from steerable_bridge.commands import acp
from steerable_bridge.commands.model_routes import build_router

args = build_parser("acp").parse_args(["acp", "--storage", "memory"])
acp._check_quality(args)
build_router(args.model).resolve(args.model).info
import steerable_bridge.transports.acp.server
print(json.dumps(sorted(m for m in sys.modules if m.startswith("steerable_bridge"))))
"""

DEFERRED = (
    "steerable_bridge.runtime.events",
    "steerable_bridge.runtime.encoding.codec",
    "steerable_bridge.runtime.turns.hooks",
    "steerable_bridge.runtime.model_quality.quality",
    "steerable_bridge.adapters.llm.http_stream",  # httpx: imported when an HTTP route resolves
    "steerable_bridge.adapters.llm.openai_compat",
    "steerable_bridge.adapters.llm.anthropic",
    "steerable_bridge.adapters.llm.openai_responses",
)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_acp_answers_initialize_without_loading_the_taxonomy() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert "steerable_bridge.transports.acp.server" in loaded
    assert loaded.isdisjoint(DEFERRED), sorted(loaded & set(DEFERRED))


def test_the_codec_builds_its_adapters_once_on_first_use() -> None:
    from steerable_bridge.runtime import events as ev
    from steerable_bridge.runtime.encoding import codec

    event = ev.RunStarted(session_id="s", run_id="r", seq=0, ts=1, model="demo:default")
    assert codec.event_from_json(codec.event_to_json(event)) == event
    assert codec._adapter() is codec._adapter()
    assert codec.events_from_json("[" + codec.event_to_json(event) + "]") == [event]
