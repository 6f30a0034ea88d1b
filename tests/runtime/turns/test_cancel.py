"""`CancelToken` (`runtime/turns/cancel.py`): a one-shot signal that cancels every scope opened
under it at once, cancels a scope opened after it fired on entry, keeps the first reason it
was given, forgets scopes once they close, and leaves a cancelled scope quietly. How the
loop closes a cancelled turn is pinned in `test_loop.py`."""

from __future__ import annotations

import anyio
import pytest

from steerable_bridge.runtime.turns.cancel import CancelToken

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]


async def test_a_new_token_is_not_cancelled() -> None:
    token = CancelToken()
    assert not token.cancelled and token.reason is None
    with token.scope() as scope:
        await anyio.lowlevel.checkpoint()
    assert not scope.cancel_called


async def test_cancel_stops_every_open_scope_at_once() -> None:
    token = CancelToken()
    waiting = 0
    both_waiting = anyio.Event()
    finished: list[str] = []

    async def wait(name: str) -> None:
        nonlocal waiting
        with token.scope() as scope:
            waiting += 1
            if waiting == 2:
                both_waiting.set()
            await anyio.Event().wait()  # never set: only the token ends this
        assert scope.cancelled_caught
        finished.append(name)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, "a")
            tg.start_soon(wait, "b")
            await both_waiting.wait()
            token.cancel("the client went away")
    assert sorted(finished) == ["a", "b"]
    assert token.cancelled and token.reason == "the client went away"


async def test_a_scope_opened_after_cancel_is_cancelled_on_entry() -> None:
    token = CancelToken()
    token.cancel()
    reached = False
    with token.scope() as scope:
        await anyio.lowlevel.checkpoint()
        reached = True
    assert not reached and scope.cancelled_caught


async def test_the_first_reason_is_kept_and_cancel_is_idempotent() -> None:
    token = CancelToken()
    token.cancel()
    token.cancel("session closed")
    assert token.reason == "cancelled by the client"


async def test_a_closed_scope_is_forgotten_and_not_cancelled_later() -> None:
    token = CancelToken()
    with token.scope() as first:
        pass
    assert token._scopes == set()
    token.cancel()
    assert not first.cancel_called


async def test_cancel_does_not_reach_past_the_scope() -> None:
    token = CancelToken()
    with token.scope():
        token.cancel()
        await anyio.lowlevel.checkpoint()
    await anyio.lowlevel.checkpoint()  # the surrounding task is not cancelled
    assert token.cancelled
