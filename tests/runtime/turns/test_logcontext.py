"""Log context (`runtime/turns/logcontext.py`): `bind` marks the current task as working for one
session's turn for the length of a block and restores what was bound before; tasks started
inside inherit it, tasks outside never see it; `ContextFilter` copies the session, run and
trace ids onto every record (None outside a turn) and never drops a record."""

from __future__ import annotations

import logging

import anyio
import pytest

from steerable_bridge.runtime.turns.logcontext import ContextFilter, LogContext, bind, current


def record() -> logging.LogRecord:
    return logging.LogRecord("t", logging.INFO, __file__, 1, "msg", None, None)


def ids(rec: logging.LogRecord) -> tuple[object, object, object]:
    return rec.session_id, rec.run_id, rec.trace_id  # type: ignore[attr-defined]


def test_nothing_is_bound_outside_a_turn_and_the_filter_says_so() -> None:
    assert current() is None
    rec = record()
    assert ContextFilter().filter(rec) is True
    assert ids(rec) == (None, None, None)


def test_bind_sets_a_fresh_context_and_restores_the_previous_one() -> None:
    with bind("s1", trace_id="t1") as outer:
        assert current() is outer == LogContext(session_id="s1", trace_id="t1")
        with bind("s2") as inner:
            assert current() is inner and inner.trace_id is None
        assert current() is outer
    assert current() is None


def test_bind_restores_the_previous_context_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), bind("s1"):
        raise RuntimeError("boom")
    assert current() is None


def test_the_filter_reads_the_run_id_filled_in_after_binding() -> None:
    with bind("s1", trace_id="t1") as context:
        context.run_id = "r1"
        rec = record()
        ContextFilter().filter(rec)
    assert ids(rec) == ("s1", "r1", "t1")


@pytest.mark.anyio
@pytest.mark.timeout(10)
async def test_tasks_started_inside_inherit_the_context_and_others_do_not() -> None:
    seen: dict[str, LogContext | None] = {}

    async def look(name: str) -> None:
        seen[name] = current()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as outside:
            with bind("s1") as context:
                async with anyio.create_task_group() as inside:
                    inside.start_soon(look, "inside")
            outside.start_soon(look, "outside")
    assert seen == {"inside": context, "outside": None}
