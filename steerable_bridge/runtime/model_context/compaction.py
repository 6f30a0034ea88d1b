"""Compaction: keep a long session's next request inside the model's context window.

One fold/summarize machinery, four triggers. The loop calls `Compactor.before_request`
once per step, before it logs the model request, and `Compactor.recover` once when the
provider answers `context_overflow`:

- *pressure*: the estimated request is over `threshold * window` → summarize;
- *overflow*: the provider said the request does not fit → one summarize pass, then the
  loop retries the step once (and fails with `context_overflow_after_compaction` if the
  retry overflows too);
- *micro* (opt-in, `micro_every` steps): fold old tool results to stubs, no model call;
- *manual* (`request()`, from ACP `/compact` or AG-UI `command: "compact"`): summarize at the
  next step boundary, bypassing the threshold and the breaker, which it resets.

A summarize pass keeps the newest turns verbatim (as many as fit `keep_ratio * window`),
cutting only where no tool call is open, and replaces everything before the cut by a summary
the session's model writes (a one-off request, never cached) or, when that call fails, by
the deterministic digest (`digest.py`). Every rewrite is one logged `compaction` event with
its trigger and pre/post token estimates, so projection rebuilds exactly what the model saw.
The summary streams as it is written: a summarize pass that asks the model logs
`compaction_started` (a fresh `compaction_id`), the model's text as
`compaction_summary_delta`s (without its leading and trailing whitespace, so the pieces join
to the stored summary unless it had to be clipped or replaced by the digest), then exactly
one of `compaction` (applied, carrying the same id) or `compaction_dropped` (cancelled
mid-summary, declined, or failed): the history only ever changes at the `compaction`, so a
cancelled summary leaves the log loadable with the conversation as it was. A provider that
does not stream sends its whole text as one delta.
A manual or overflow compaction never grows the context: when the summary request (header,
summary and the turns kept verbatim) is estimated no smaller than the request it would
replace — a short conversation whose summary is longer than itself — nothing is logged and
`declined` says why (the reply to `/compact`). A pressure compaction is still logged then:
it is an ineffective one, which the breaker counts and whose notice must reach the model.

Breakers: three consecutive ineffective pressure compactions (still over the threshold), or
three rapid refills (pressure again within `refill_window` steps of an effective one), open
the circuit: pressure stops firing and the tripping compaction carries a notice the model
and the user see. Overflow recovery stays bounded to one pass per step. The compactor holds
one session's breaker state in memory; it does no I/O except through the provider it is
handed.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from steerable_bridge.runtime import events as ev
from steerable_bridge.runtime.events import CompactionTrigger, LoopEvent
from steerable_bridge.runtime.model_context.digest import digest
from steerable_bridge.runtime.model_context.projection import (
    SUMMARY_HEADER,
    History,
    fold_tool_result,
    is_folded,
)
from steerable_bridge.runtime.model_context.tokens import (
    RequestEstimator,
    TokenCalibration,
    estimate_message_tokens,
    estimate_text_tokens,
)
from steerable_bridge.runtime.ports.model import (
    ModelProvider,
    ModelRequest,
    ProviderError,
    TextChunk,
)
from steerable_bridge.runtime.turns.cancel import CancelToken
from steerable_bridge.runtime.values import Message, TextPart

__all__ = ["CompactionSettings", "Compactor", "StepAccess"]

logger = logging.getLogger(__name__)

SUMMARY_SYSTEM = (
    "You compress a conversation between a user and an AI coding assistant so the assistant"
    " can continue it with less context. Write a faithful summary that keeps: what the user"
    " asked (the latest request in full), decisions made and why, files read or changed and"
    " what matters in them, commands run and their outcome, errors met, and what is still"
    " left to do. Use short headed lists. Do not invent anything. Do not call tools."
)

_ITEM_TOKENS = 1500
"""Each folded message is cut to about this many tokens before it goes to the summarizer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSettings:
    """How and when a session compacts. `enabled=False` turns off every automatic trigger."""

    enabled: bool = True
    threshold: float = 0.8
    """Pressure fires when the estimated next request exceeds this share of the window."""
    keep_ratio: float = 0.25
    """The newest turns kept verbatim may use at most this share of the window."""
    micro_every: int = 0
    """Fold old tool results every N steps (0: never)."""
    micro_keep: int = 3
    """Tool results the micro fold leaves readable (the newest ones)."""
    summary_max_tokens: int = 1024
    summary_timeout_s: float = 120.0
    max_ineffective: int = 3
    refill_window: int = 3
    max_refills: int = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class StepAccess:
    """What the compactor may use of the running step (handed in by the loop)."""

    events: Callable[[], Sequence[LoopEvent]]
    """The session log as it is now."""
    history: Callable[[], History]
    """The model's history of the log as it is now (kept up to date by the log)."""
    rebuild: Callable[[], ModelRequest]
    """The step's request built from the log as it is now."""
    emit: Callable[..., Awaitable[Any]]
    """Logs a `compaction` event: `emit(**fields)`."""
    record: Callable[..., Awaitable[Any]]
    """Logs any other event of the pass: `record(cls, **fields)` (its start, the summary's
    deltas, its drop)."""
    new_id: Callable[[str], str]
    """A fresh id with the given prefix (the session's id scheme)."""
    provider: ModelProvider
    window: int | None
    cancel: CancelToken


@dataclass(frozen=True, slots=True)
class _Plan:
    through: int
    floor: int
    folded: tuple[Message, ...]
    kept: tuple[Message, ...]


class Compactor:
    """One session's compaction: its settings, the manual request flag and the breakers."""

    def __init__(
        self, settings: CompactionSettings, *, calibration: TokenCalibration | None = None
    ) -> None:
        self.settings = settings
        self.calibration = calibration
        self.steps = 0
        self.compactions = 0
        self.ineffective = 0
        self.refills = 0
        self.circuit_reason: str | None = None
        self._last_pressure_step: int | None = None
        self._last_effective = False
        self._manual = False
        self._estimator = RequestEstimator()
        self._open: str | None = None
        """The id of the summarize pass that started and logged no end yet."""
        self.declined = ""
        """Why the last summarize pass logged nothing although it could fold (its summary
        would not have been smaller); empty when it compacted or found nothing to fold."""

    @property
    def circuit_open(self) -> bool:
        return self.circuit_reason is not None

    def request(self) -> None:
        """Compact at the next step boundary (manual trigger)."""
        self._manual = True

    @property
    def requested(self) -> bool:
        return self._manual

    def estimate(self, request: ModelRequest) -> int:
        tokens = self._estimator.estimate(request)
        if self.calibration is not None:
            return self.calibration.calibrated(request.model, tokens)
        return tokens

    # -- triggers ---------------------------------------------------------------------------

    async def before_request(self, step: StepAccess, request: ModelRequest) -> ModelRequest:
        """Called once per step before the request is logged; returns the request to send."""
        self.steps += 1
        settings = self.settings
        if self._manual:
            self._manual = False
            self.ineffective = self.refills = 0
            self.circuit_reason = None
            return await self._summarize(step, request, "manual")
        if not settings.enabled:
            return request
        if settings.micro_every and self.steps % settings.micro_every == 0:
            request = await self._micro(step, request)
        window = step.window
        if window is None or self.circuit_open:
            return request
        if self.estimate(request) <= settings.threshold * window:
            self.ineffective = 0
            return request
        return await self._summarize(step, request, "pressure")

    async def recover(self, step: StepAccess, request: ModelRequest) -> ModelRequest | None:
        """After a context overflow: one summarize pass; None when nothing could be folded."""
        before = self.compactions
        rebuilt = await self._summarize(step, request, "overflow")
        if self.compactions == before:
            return None
        return rebuilt

    # -- micro fold -------------------------------------------------------------------------

    async def _micro(self, step: StepAccess, request: ModelRequest) -> ModelRequest:
        entries = step.history().entries()
        readable = [(seq, m) for seq, m in entries if m.role == "tool" and not is_folded(m)]
        keep = self.settings.micro_keep
        if len(readable) <= keep:
            return request
        through = readable[-keep - 1][0]
        messages = tuple(fold_tool_result(m) if seq <= through else m for seq, m in entries)
        pre = self.estimate(request)
        post = self.estimate(dataclasses.replace(request, messages=messages))
        await step.emit(
            summary="",
            through_seq=through,
            trigger="micro",
            scope="tool_results",
            pre_tokens=pre,
            post_tokens=post,
        )
        return step.rebuild()

    # -- summarize --------------------------------------------------------------------------

    async def _summarize(
        self, step: StepAccess, request: ModelRequest, trigger: CompactionTrigger
    ) -> ModelRequest:
        history = step.history()
        self.declined = ""
        pre = self.estimate(request)
        window = step.window or pre
        plan = self._plan(history, budget=int(self.settings.keep_ratio * window))
        if plan is None:
            logger.debug("compaction (%s): nothing to fold", trigger)
            return request
        compaction_id = step.new_id("compaction")
        await step.record(ev.CompactionStarted, compaction_id=compaction_id, trigger=trigger)
        self._open = compaction_id
        try:
            return await self._apply(step, request, trigger, plan, pre, window, compaction_id)
        except BaseException:
            # A bug, a store failure or the task cancelled: unless the pass already logged its
            # end, say the compaction did not happen (bounded and shielded: the task may be
            # cancelled), then let the error end the turn.
            if self._open != compaction_id:
                raise
            self._open = None
            with anyio.move_on_after(5, shield=True):
                await step.record(
                    ev.CompactionDropped,
                    compaction_id=compaction_id,
                    reason="failed",
                    detail="The compaction failed; the conversation is unchanged.",
                )
            raise

    async def _apply(
        self,
        step: StepAccess,
        request: ModelRequest,
        trigger: CompactionTrigger,
        plan: _Plan,
        pre: int,
        window: int,
        compaction_id: str,
    ) -> ModelRequest:
        """The summary (streamed under `compaction_id`), then the compaction or its drop."""
        history = step.history()
        summary, fallback = await self._summary(step, request, plan, window, compaction_id)
        if step.cancel.cancelled:
            self._open = None
            await step.record(
                ev.CompactionDropped,
                compaction_id=compaction_id,
                reason="cancelled",
                detail="Cancelled while the summary was being written; the conversation is"
                " unchanged.",
            )
            return request
        text = SUMMARY_HEADER + summary
        summary_message = Message(id="summary", role="user", content=(TextPart(text=text),))
        post = self.estimate(dataclasses.replace(request, messages=(summary_message, *plan.kept)))
        if post >= pre and trigger != "pressure":  # no shorter: keep the conversation as is
            self.declined = (
                f"Not compacted: a summary of the conversation so far ({post:,} tokens with the"
                f" turns kept verbatim) would not be smaller than it is now ({pre:,} tokens)."
                " Compact again once the conversation is longer."
            )
            logger.info("compaction (%s) declined: %d → %d tokens", trigger, pre, post)
            self._open = None
            await step.record(
                ev.CompactionDropped,
                compaction_id=compaction_id,
                reason="declined",
                detail=self.declined,
            )
            return request
        notice = self._breakers(trigger, post, window) if trigger == "pressure" else ""
        if notice:
            post += estimate_text_tokens(notice)
        turns = history.turns(plan.floor, plan.through)
        self._open = None
        await step.emit(
            summary=summary,
            through_seq=plan.through,
            trigger=trigger,
            scope="history",
            pre_tokens=pre,
            post_tokens=post,
            fallback=fallback,
            notice=notice,
            turns=turns,
            compaction_id=compaction_id,
        )
        self.compactions += 1
        return step.rebuild()

    def _breakers(self, trigger: CompactionTrigger, post: int, window: int) -> str:
        """Count this pressure compaction; the notice to log when it opens the circuit."""
        settings = self.settings
        effective = post <= settings.threshold * window
        self.ineffective = 0 if effective else self.ineffective + 1
        last = self._last_pressure_step
        if (
            effective
            and last is not None
            and self._last_effective
            and self.steps - last <= settings.refill_window
        ):
            self.refills += 1
        elif effective:
            self.refills = 0
        self._last_pressure_step = self.steps
        self._last_effective = effective
        if self.ineffective >= settings.max_ineffective:
            self.circuit_reason = "consecutive_failures"
            why = (
                f"{self.ineffective} compactions in a row left the context over"
                f" {settings.threshold:.0%} of the window"
            )
        elif self.refills >= settings.max_refills:
            self.circuit_reason = "rapid_refill"
            why = (
                f"the context refilled within {settings.refill_window} steps after each of"
                f" the last {self.refills} compactions"
            )
        else:
            return ""
        return (
            f"Note: automatic compaction is paused because {why}. Work in smaller pieces:"
            " read files in ranges, keep tool output short, and finish the current task"
            " before starting another. The user can run /compact to compact now."
        )

    def _plan(self, history: History, *, budget: int) -> _Plan | None:
        """Where to cut: the earliest safe cut whose verbatim tail fits `budget` tokens.

        It reads the state the log keeps (`projection.History`): the cuts after the newest
        history compaction and the messages, never the events themselves."""
        floor = history.floor
        cuts = history.cuts()
        entries = history.entries()
        by_seq = sorted((seq, estimate_message_tokens(m)) for seq, m in entries)
        seqs = [seq for seq, _ in by_seq]
        tokens = [0] * (len(by_seq) + 1)  # tokens[i]: the messages from by_seq[i] on
        for i in range(len(by_seq) - 1, -1, -1):
            tokens[i] = tokens[i + 1] + by_seq[i][1]
        after_floor = bisect.bisect_right(seqs, floor)
        first = seqs[after_floor] if after_floor < len(seqs) else None
        useful = [(cut, turn) for cut, turn in cuts if first is not None and first <= cut]

        def fits(cut: int) -> bool:
            return tokens[bisect.bisect_right(seqs, cut)] <= budget

        # Whole turns first; a cut inside a turn (at a step) only when no turn cut fits.
        chosen = next((cut for cut, turn in useful if turn and fits(cut)), None)
        if chosen is None:
            chosen = next((cut for cut, _ in useful if fits(cut)), None)
        if chosen is None and useful:
            chosen = useful[-1][0]
        if chosen is None:
            return None
        return _Plan(
            through=chosen,
            floor=floor,
            folded=tuple(m for seq, m in entries if seq <= chosen),
            kept=tuple(m for seq, m in entries if seq > chosen),
        )

    async def _summary(
        self,
        step: StepAccess,
        request: ModelRequest,
        plan: _Plan,
        window: int,
        compaction_id: str,
    ) -> tuple[str, bool]:
        """The model's summary of the folded messages, or the digest when that fails; the
        model's text is logged as it streams (`_SummaryStream`)."""
        settings = self.settings
        max_out = max(64, min(settings.summary_max_tokens, window // 4))
        budget = max(200, int(window * 0.7) - max_out - estimate_text_tokens(SUMMARY_SYSTEM))
        summary_request = ModelRequest(
            model=request.model,
            system=SUMMARY_SYSTEM,
            messages=(
                Message(
                    id="compaction-input",
                    role="user",
                    content=(TextPart(text=transcript(plan.folded, budget)),),
                ),
            ),
            max_tokens=max_out,
            one_off=True,
        )
        parts: list[str] = []
        live = _SummaryStream(step, compaction_id)
        try:
            with step.cancel.scope(), anyio.fail_after(settings.summary_timeout_s):
                async for item in step.provider.stream(summary_request):
                    if isinstance(item, TextChunk) and item.delta:
                        parts.append(item.delta)
                        await live.feed(item.delta)
        except ProviderError as error:
            logger.warning("compaction summary failed (%s): %s", error.code, error.message)
            parts = []
        except TimeoutError:
            logger.warning("compaction summary timed out after %ss", settings.summary_timeout_s)
            parts = []
        text = "".join(parts).strip()
        if text and not step.cancel.cancelled:
            return clip_middle(text, max_out * 4), False
        fallback = digest(step.events(), floor=plan.floor, through=plan.through)
        return clip_middle(fallback, max_out * 4), True


class _SummaryStream:
    """Logs the summary's text as `compaction_summary_delta`s while the model writes it,
    without its leading and trailing whitespace: leading whitespace is dropped, and trailing
    whitespace is held back until more text follows it, so the logged pieces join to exactly
    `"".join(parts).strip()`, the summary the compaction stores."""

    __slots__ = ("_compaction_id", "_held", "_started", "_step")

    def __init__(self, step: StepAccess, compaction_id: str) -> None:
        self._step = step
        self._compaction_id = compaction_id
        self._held = ""
        self._started = False

    async def feed(self, delta: str) -> None:
        if not self._started:
            delta = delta.lstrip()
            if not delta:
                return
            self._started = True
        text = self._held + delta
        body = text.rstrip()
        self._held = text[len(body) :]
        if body:
            await self._step.record(
                ev.CompactionSummaryDelta, compaction_id=self._compaction_id, delta=body
            )


def transcript(messages: Sequence[Message], budget_tokens: int) -> str:
    """The folded messages as plain text for the summarizer, newest kept when over budget."""
    items: list[str] = []
    item_chars = max(400, min(_ITEM_TOKENS, budget_tokens // 3) * 4)
    for message in messages:
        body = message.text
        if message.reasoning:
            body = f"(thinking) {message.reasoning}\n{body}"
        for call in message.tool_calls:
            body += f"\n-> {call.name}({call.arguments_json})"
        label: str = "tool result" if message.role == "tool" else message.role
        if message.is_error:
            label += " (error)"
        items.append(f"[{label}]\n{clip_middle(body.strip(), item_chars)}")
    total = 0
    kept: list[str] = []
    for item in reversed(items):
        total += len(item) // 4 + 4
        if total > budget_tokens and kept:
            kept.append(f"[... {len(items) - len(kept)} earlier messages omitted ...]")
            break
        kept.append(item)
    return "Conversation to summarize:\n\n" + "\n\n".join(reversed(kept))


def clip_middle(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters by removing its middle, saying how much."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters omitted ...]\n{text[-tail:]}"
