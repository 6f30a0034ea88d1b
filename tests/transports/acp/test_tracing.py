"""ACP and tracing: a prompt's `_meta.traceparent` continues the editor's trace, and the
run's trace id comes back in the response's `_meta.steerable.trace_id`."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import schema as acp

from tests.transports.acp.harness import running

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


async def test_a_prompt_traceparent_is_continued_and_the_trace_id_answered(
    tmp_path: Path,
) -> None:
    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "acp-under-test"}
    async with running(tmp_path, [{"text": "hi"}, {"text": "again"}], env=env) as run:
        await run.init()
        sid = await run.new()
        block = acp.TextContentBlock(type="text", text="hello")
        traced = await run.conn.prompt(
            session_id=sid, prompt=[block], traceparent=f"00-{TRACE}-00f067aa0ba902b7-01"
        )
        assert traced.field_meta is not None
        assert traced.field_meta["steerable"]["trace_id"] == TRACE
        fresh = await run.prompt(sid, "hello again")
        assert fresh.field_meta is not None
        other = fresh.field_meta["steerable"]["trace_id"]
        assert len(other) == 32 and other != TRACE  # a new trace of its own
