"""`serve`'s `GET /metrics` after a load run, as an operator scrapes it: every counter matches
the runs made, gauges are back to zero, the endpoint wants the token, and `--log-format
json` logs one JSON object per line."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .serve_child import started

TOKEN = "s3cret"


@pytest.fixture
def server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    args = ["--token", TOKEN, "--log-format", "json"]
    with started(args, stderr=subprocess.PIPE) as served:
        yield served


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


@pytest.mark.timeout(90)
def test_metrics_count_the_runs_made(server: tuple[str, subprocess.Popen[str]]) -> None:
    base, process = server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    prompts = ["hello"] * 6 + ["use a tool"] * 4 + ["show an error"] * 2
    with httpx.Client(base_url=base, timeout=20) as client:
        assert client.get("/metrics").status_code == 401
        for number, text in enumerate(prompts):
            body = {
                "threadId": f"t{number % 3}",
                "runId": f"r{number}",
                "messages": [{"id": f"u{number}", "role": "user", "content": text}],
            }
            reply = client.post("/agent", json=body, headers=auth)
            assert reply.status_code == 200 and "RUN_" in reply.text
        scraped = client.get("/metrics", headers=auth)
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    s = _samples(scraped.text)
    assert s[("steerable_runs_started_total", ())] == len(prompts)
    assert s[("steerable_runs_finished_total", (("stop_reason", "end_turn"),))] == 10
    (failed,) = [v for (name, _), v in s.items() if name == "steerable_runs_failed_total"]
    assert failed == 2
    assert s[("steerable_active_runs", ())] == 0
    assert s[("steerable_sse_clients", ())] == 0
    assert s[("steerable_run_duration_seconds_count", ())] == len(prompts)
    assert s[("steerable_time_to_first_event_seconds_count", ())] == len(prompts)
    tools = [
        v
        for (name, labels), v in s.items()
        if name == "steerable_tool_duration_seconds_count" and ("status", "completed") in labels
    ]
    assert sum(tools) == 4
    calls = sum(
        v for (name, _), v in s.items() if name == "steerable_model_call_duration_seconds_count"
    )
    assert calls == 6 + 4 * 2  # a tool run takes two model calls; errors end before a response
    assert s[("steerable_model_tokens_total", (("type", "output"),))] > 0
    assert s[("steerable_store_append_seconds_count", ())] >= len(prompts)

    process.terminate()
    _, err = process.communicate(timeout=10)
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert lines, "serve logged nothing at info"
    assert all({"ts", "level", "logger", "message", "session_id"} <= set(x) for x in lines)
    assert any(x["logger"].startswith("uvicorn") for x in lines)
