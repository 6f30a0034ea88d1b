"""The prompt-cache drift monitor: arms on the first cache hit, flags a collapsed hit rate
once per streak of low steps, ignores short prompts and providers without cache counts, and
the loop logs its verdict as a `hook_action` — across turns of one session."""

from __future__ import annotations

import pytest

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.model_context.cache_drift import CacheDriftMonitor
from steerable_bridge.runtime.values import Usage
from tests.runtime.harness import make_agent, of, prompt, scripted


def usage(prompt_tokens: int, cached: int) -> Usage:
    return Usage(prompt_tokens=prompt_tokens, completion_tokens=10, cached_tokens=cached)


def test_flags_once_after_consecutive_low_steps_and_rearms_after_a_good_one() -> None:
    monitor = CacheDriftMonitor(consecutive_steps=2)
    verdicts = [
        monitor.observe(u)
        for u in (
            usage(10_000, 0),  # not armed yet: a cold cache is no drift
            usage(10_000, 9_000),  # armed
            usage(10_000, 500),  # low 1 (a re-warm after compaction looks like this)
            usage(10_000, 9_500),  # good: the streak resets
            usage(10_000, 100),  # low 1
            usage(10_000, 100),  # low 2 → flag
            usage(10_000, 100),  # still low: already flagged for this streak
        )
    ]
    flagged = [i for i, v in enumerate(verdicts) if v is not None]
    assert flagged == [5]
    verdict = verdicts[5]
    assert verdict is not None and verdict.hit_rate == pytest.approx(0.01)
    assert "1%" in verdict.detail and "2 steps" in verdict.detail
    assert "STEERABLE_PROMPT_CACHE_TTL" in verdict.detail


def test_short_prompts_and_providers_without_cache_counts_never_flag() -> None:
    monitor = CacheDriftMonitor(consecutive_steps=2, min_prompt_tokens=4096)
    assert all(monitor.observe(usage(20_000, 0)) is None for _ in range(10))
    assert not monitor.armed
    monitor.observe(usage(20_000, 19_000))
    assert all(monitor.observe(usage(1_000, 0)) is None for _ in range(10))
    assert monitor.low_steps == 0


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_the_loop_logs_drift_as_a_hook_action_across_turns() -> None:
    def step(prompt_tokens: int, cached: int) -> dict[str, object]:
        return {
            "text": "ok",
            "usage": {"prompt_tokens": prompt_tokens, "cached_tokens": cached},
        }

    model = scripted(
        step(8_000, 0),
        step(9_000, 8_000),
        step(10_000, 200),
        step(11_000, 300),
        step(12_000, 400),
        step(13_000, 12_000),
    )
    session = await make_agent(model).new_session("/work")
    seen: list[ev.LoopEvent] = []
    for _ in range(6):
        _, events = await prompt(session)
        seen.extend(events)
    actions = of(seen, ev.HookAction)
    assert [(a.hook, a.action) for a in actions] == [("cache_drift", "drift_detected")]
    responses = of(seen, ev.ModelResponseEvent)
    assert seen.index(actions[0]) > seen.index(responses[4])  # after the third low step
    assert "3%" in actions[0].detail  # 400 of 12,000
    updates = of(seen, ev.UsageUpdated)
    assert [u.cache_read_tokens for u in updates] == [0, 8_000, 200, 300, 400, 12_000]
