"""AG-UI stream validity: the rules a stream of AG-UI events must keep, each with an id.

`check_agui_stream(events)` reads events as they arrived on the wire — JSON objects (dicts),
so a `null` the TypeScript client would reject is still visible — and returns one `Finding`
per broken rule. It enforces what the official `@ag-ui/client` `verifyEvents` enforces
(RUN_STARTED first; nothing after RUN_FINISHED / RUN_ERROR but a new RUN_STARTED; CONTENT /
END / ARGS only inside an open message, call or reasoning span of the same id; steps paired;
nothing open at RUN_FINISHED) and what it lets through but UIs trip over (exactly one
terminal event per run, run ids that match, results for calls that were started, unique
result message ids, no `null` in optional fields, no unknown fields), plus the url questions
of `docs/agui-routes.md`: an interrupt whose `metadata.mode` is `url` names an http(s) page,
and CUSTOM `steerable.question_completed` completes a url question the stream holds (its
interrupt, or its CUSTOM `steerable.question_asked` in url mode) or the run's `resume[]`
answers, once; a CUSTOM `steerable.model_request` sent by reference (`agui_requests.py`) has
the documented shape and, when the stream carried the thread's request before it, names that
one and rebuilds to a request whose message count and digests match. Each event is also
validated against the SDK's models (`ag_ui.core.Event`). This module never repairs a stream;
it only reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ag_ui.core import Event, RunAgentInput
from pydantic import BaseModel, TypeAdapter, ValidationError

from steerable_bridge.conformance.agui_requests import (
    REQUEST,
    check_reference,
    is_by_reference,
    rebuild,
)
from steerable_bridge.conformance.findings import Finding, Rule

__all__ = ["AGUI_RULES", "check_agui_stream", "event_as_json"]

AGUI_RULES: tuple[Rule, ...] = (
    Rule(id="agui.schema", requires="every event validates against the ag_ui.core models"),
    Rule(id="agui.unknown-field", requires="no field the protocol does not define"),
    Rule(id="agui.null-field", requires="optional fields are omitted, never null"),
    Rule(id="agui.first-event", requires="the stream starts with RUN_STARTED (or RUN_ERROR)"),
    Rule(
        id="agui.after-terminal",
        requires="after RUN_FINISHED / RUN_ERROR only a new RUN_STARTED may follow",
    ),
    Rule(id="agui.one-terminal", requires="every run ends with exactly one terminal event"),
    Rule(id="agui.run-id", requires="a run's terminal event names the run it ends"),
    Rule(id="agui.text-open", requires="TEXT_MESSAGE_START does not reopen an open message"),
    Rule(
        id="agui.text-not-open",
        requires="TEXT_MESSAGE_CONTENT / END only inside an open message with that id",
    ),
    Rule(id="agui.tool-open", requires="TOOL_CALL_START does not reopen an open call"),
    Rule(
        id="agui.tool-not-open",
        requires="TOOL_CALL_ARGS / END only inside an open call with that id",
    ),
    Rule(id="agui.reasoning-open", requires="REASONING_*START does not reopen an open one"),
    Rule(
        id="agui.reasoning-not-open",
        requires="REASONING_MESSAGE_CONTENT / END and REASONING_END only when open",
    ),
    Rule(id="agui.step-open", requires="STEP_STARTED does not restart an active step"),
    Rule(id="agui.step-not-open", requires="STEP_FINISHED only for an active step"),
    Rule(id="agui.open-at-finish", requires="nothing is left open at RUN_FINISHED"),
    Rule(
        id="agui.result-unknown-call",
        requires="TOOL_CALL_RESULT answers a call that was started (or sent in the input)",
    ),
    Rule(
        id="agui.result-id-reused",
        requires="each TOOL_CALL_RESULT has its own messageId, unused by any other message",
    ),
    Rule(
        id="agui.url-interrupt",
        requires="an interrupt with metadata.mode url names an absolute http(s) metadata.url",
    ),
    Rule(
        id="agui.question-completed",
        requires="CUSTOM steerable.question_completed names a url question of the stream"
        " (interrupt or steerable.question_asked) or one the run's input resumes, once",
    ),
    Rule(
        id="agui.model-request",
        requires="a model request sent by reference names the stream's previous request of"
        " the thread (when the stream carried one) and rebuilds from it to its count and"
        " digests",
    ),
)

QUESTION_ASKED = "steerable.question_asked"
QUESTION_COMPLETED = "steerable.question_completed"

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)
_TERMINAL = ("RUN_FINISHED", "RUN_ERROR")


def event_as_json(event: object) -> dict[str, Any]:
    """A wire event as a JSON object: dicts pass through, SDK models are dumped by alias."""
    if isinstance(event, BaseModel):
        data: dict[str, Any] = event.model_dump(mode="json", by_alias=True)
        return data
    if isinstance(event, Mapping):
        return dict(event)
    raise TypeError(f"an AG-UI event must be a JSON object or an SDK model, not {event!r}")


def _shape_findings(model: BaseModel, raw: object, path: str, out: list[str]) -> None:
    """Walk a validated model beside its raw JSON: nulls in optional fields, unknown keys."""
    if not isinstance(raw, Mapping):
        return
    fields = type(model).model_fields
    known: dict[str, str] = {}
    for name, info in fields.items():
        known[info.alias if info.alias is not None else name] = name
        known[name] = name
    for key, value in raw.items():
        field_name = known.get(key)
        if field_name is None:
            out.append(f"unknown:{path}{key}")
            continue
        info = fields[field_name]
        if value is None and not info.is_required():
            out.append(f"null:{path}{key}")
            continue
        _walk(getattr(model, field_name), value, f"{path}{key}.", out)


def _walk(value: object, raw: object, path: str, out: list[str]) -> None:
    if isinstance(value, BaseModel):
        _shape_findings(value, raw, path, out)
    elif isinstance(value, list) and isinstance(raw, list):
        for index, (item, raw_item) in enumerate(zip(value, raw, strict=False)):
            _walk(item, raw_item, f"{path}{index}.", out)


@dataclass(slots=True)
class _Run:
    thread_id: str | None = None
    run_id: str | None = None
    terminal: str | None = None
    text: set[str] = field(default_factory=set)
    tools: set[str] = field(default_factory=set)
    spans: set[str] = field(default_factory=set)
    reasoning: set[str] = field(default_factory=set)
    steps: set[str] = field(default_factory=set)


class _Checker:
    def __init__(self, known_calls: Iterable[str]) -> None:
        self.findings: list[Finding] = []
        self.run: _Run | None = None
        self.seen_first = False
        self.started_calls: set[str] = set(known_calls)
        self.message_ids: set[str] = set()
        self.result_ids: set[str] = set()
        self.url_questions: dict[str, bool] = {}
        """Interrupt id of each url question → whether it was completed."""
        self.requests: dict[str | None, Mapping[str, Any]] = {}
        """Each thread's last model request the stream carried, whole (JSON)."""
        self.where = ""

    def report(self, rule_id: str, message: str) -> None:
        self.findings.append(Finding(rule_id=rule_id, message=message, where=self.where))

    def check(self, index: int, raw: Mapping[str, Any]) -> None:
        kind = str(raw.get("type", "?"))
        self.where = f"event {index} ({kind})"
        try:
            model = _EVENT.validate_python(raw)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()[:5]
            )
            self.report("agui.schema", f"does not validate against ag_ui.core.Event: {problems}")
            return
        shape: list[str] = []
        _shape_findings(model, raw, "", shape)
        for item in shape:
            what, _, key = item.partition(":")
            if what == "null":
                self.report(
                    "agui.null-field",
                    f"optional field {key!r} is null; omit it (the TypeScript client rejects null)",
                )
            else:
                self.report(
                    "agui.unknown-field",
                    f"field {key!r} is not part of {kind}; put extra data in 'metadata'",
                )
        self.order(kind, raw)

    def order(self, kind: str, raw: Mapping[str, Any]) -> None:
        first = not self.seen_first
        self.seen_first = True
        if first and kind not in ("RUN_STARTED", "RUN_ERROR"):
            self.report("agui.first-event", f"the first event is {kind}; send RUN_STARTED first")
        run = self.run
        if kind == "RUN_STARTED":
            if run is not None and run.terminal is None:
                self.report(
                    "agui.one-terminal",
                    f"run {run.run_id!r} got no RUN_FINISHED or RUN_ERROR before this new run",
                )
            self.run = _Run(thread_id=raw.get("threadId"), run_id=raw.get("runId"))
            self.known_from_input(raw.get("input"))
            return
        if run is None:
            run = self.run = _Run()
        if run.terminal is not None:
            if kind in _TERMINAL:
                self.report(
                    "agui.one-terminal",
                    f"{kind} after {run.terminal}: a run ends exactly once",
                )
            else:
                self.report(
                    "agui.after-terminal",
                    f"{kind} after {run.terminal}; start a new run with RUN_STARTED first",
                )
            return
        handler = getattr(self, f"on_{kind.lower()}", None)
        if handler is not None:
            handler(run, raw)

    def known_from_input(self, payload: object) -> None:
        if not isinstance(payload, Mapping):
            return
        for message in payload.get("messages") or ():
            if isinstance(message, Mapping):
                for call in message.get("toolCalls") or ():
                    if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                        self.started_calls.add(call["id"])
        for entry in payload.get("resume") or ():  # the answers to an earlier run's interrupts
            interrupt_id = entry.get("interruptId") if isinstance(entry, Mapping) else None
            if isinstance(interrupt_id, str):
                self.url_questions.setdefault(interrupt_id, False)

    # -- terminal events --------------------------------------------------------------------

    def on_run_finished(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.ends(run, "RUN_FINISHED", raw)
        outcome = raw.get("outcome")
        interrupts = outcome.get("interrupts") if isinstance(outcome, Mapping) else None
        for item in interrupts if isinstance(interrupts, list) else ():
            meta = item.get("metadata") if isinstance(item, Mapping) else None
            if isinstance(meta, Mapping) and meta.get("mode") == "url":
                self.url_interrupt(item, meta.get("url"))
        still = [
            ("steps", run.steps),
            ("text messages", run.text),
            ("reasoning messages", run.reasoning),
            ("reasoning spans", run.spans),
            ("tool calls", run.tools),
        ]
        for what, ids in still:
            if ids:
                self.report(
                    "agui.open-at-finish",
                    f"RUN_FINISHED while {what} are still open: {', '.join(sorted(ids))}",
                )

    def url_interrupt(self, item: Mapping[str, Any], url: object) -> None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            self.report(
                "agui.url-interrupt",
                f"interrupt {item.get('id')!r} has url {url!r}; send an absolute http(s) page",
            )
        if isinstance(item.get("id"), str):
            self.url_questions.setdefault(item["id"], False)

    def on_custom(self, run: _Run, raw: Mapping[str, Any]) -> None:
        value = raw.get("value")
        if raw.get("name") == REQUEST and isinstance(value, Mapping):
            self.on_request(run, value)
            return
        if raw.get("name") == QUESTION_ASKED and isinstance(value, Mapping):
            if value.get("mode") == "url" and isinstance(value.get("question_id"), str):
                self.url_questions.setdefault(value["question_id"], False)
            return
        if raw.get("name") != QUESTION_COMPLETED:
            return
        question_id = value.get("question_id") if isinstance(value, Mapping) else None
        done = self.url_questions.get(str(question_id))
        if done is None:
            self.report(
                "agui.question-completed",
                f"question {question_id!r} completed, but no url question interrupt named it",
            )
        elif done:
            self.report("agui.question-completed", f"question {question_id!r} completed twice")
        else:
            self.url_questions[str(question_id)] = True

    def on_request(self, run: _Run, value: Mapping[str, Any]) -> None:
        whole: Mapping[str, Any] | None = value
        try:
            if is_by_reference(value):
                base = self.requests.get(run.thread_id)
                if base is None:
                    check_reference(value)  # its base came before the stream
                    whole = None
                else:
                    whole = rebuild(value, base)
        except (ValueError, KeyError, TypeError) as err:
            self.report("agui.model-request", f"a model request by reference: {err}")
            whole = None
        if whole is None:
            self.requests.pop(run.thread_id, None)  # what comes next cannot be rebuilt
        else:
            self.requests[run.thread_id] = whole

    def on_run_error(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.ends(run, "RUN_ERROR", raw)

    def ends(self, run: _Run, kind: str, raw: Mapping[str, Any]) -> None:
        run.terminal = kind
        if kind == "RUN_FINISHED" and run.run_id is not None:
            for key, expected in (("runId", run.run_id), ("threadId", run.thread_id)):
                if raw.get(key) != expected:
                    self.report(
                        "agui.run-id",
                        f"{key} {raw.get(key)!r} does not match RUN_STARTED's {expected!r}",
                    )

    # -- paired spans -----------------------------------------------------------------------

    def opens(self, ids: set[str], key: str, rule: str, raw: Mapping[str, Any]) -> None:
        value = str(raw.get(key))
        if value in ids:
            self.report(rule, f"{key} {value!r} is already open; end it before reopening it")
        ids.add(value)

    def inside(self, ids: set[str], key: str, rule: str, raw: Mapping[str, Any], end: bool) -> None:
        value = str(raw.get(key))
        if value not in ids:
            self.report(rule, f"no open stream with {key} {value!r}; start it first")
        elif end:
            ids.discard(value)

    def on_text_message_start(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.opens(run.text, "messageId", "agui.text-open", raw)
        self.message_ids.add(str(raw.get("messageId")))

    def on_text_message_content(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.inside(run.text, "messageId", "agui.text-not-open", raw, end=False)

    def on_text_message_end(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.inside(run.text, "messageId", "agui.text-not-open", raw, end=True)

    def on_tool_call_start(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.opens(run.tools, "toolCallId", "agui.tool-open", raw)
        self.started_calls.add(str(raw.get("toolCallId")))

    def on_tool_call_args(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.inside(run.tools, "toolCallId", "agui.tool-not-open", raw, end=False)

    def on_tool_call_end(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.inside(run.tools, "toolCallId", "agui.tool-not-open", raw, end=True)

    def on_reasoning_start(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.opens(run.spans, "messageId", "agui.reasoning-open", raw)

    def on_reasoning_message_start(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.opens(run.reasoning, "messageId", "agui.reasoning-open", raw)

    def on_reasoning_message_content(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.inside(run.reasoning, "messageId", "agui.reasoning-not-open", raw, end=False)

    def on_reasoning_message_end(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.inside(run.reasoning, "messageId", "agui.reasoning-not-open", raw, end=True)

    def on_reasoning_end(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.inside(run.spans, "messageId", "agui.reasoning-not-open", raw, end=True)

    def on_step_started(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.opens(run.steps, "stepName", "agui.step-open", raw)

    def on_step_finished(self, run: _Run, raw: Mapping[str, Any]) -> None:
        self.inside(run.steps, "stepName", "agui.step-not-open", raw, end=True)

    def on_tool_call_result(self, run: _Run, raw: Mapping[str, Any]) -> None:
        call_id = str(raw.get("toolCallId"))
        if call_id not in self.started_calls:
            self.report(
                "agui.result-unknown-call",
                f"result for tool call {call_id!r}, which no TOOL_CALL_START (or input) opened",
            )
        message_id = str(raw.get("messageId"))
        if message_id in self.result_ids or message_id in self.message_ids:
            self.report(
                "agui.result-id-reused",
                f"messageId {message_id!r} is already used; UIs keep one message and drop the"
                " other, so give each result its own id",
            )
        self.result_ids.add(message_id)

    def finish(self, count: int) -> None:
        self.where = f"end of stream (after {count} events)"
        if self.run is not None and self.run.terminal is None:
            self.report(
                "agui.one-terminal",
                f"the stream ended without RUN_FINISHED or RUN_ERROR for run {self.run.run_id!r}",
            )


def check_agui_stream(
    events: Sequence[object], *, run_input: RunAgentInput | Mapping[str, Any] | None = None
) -> list[Finding]:
    """Every rule the stream breaks, in stream order; empty when it is valid.

    `run_input` (the RunAgentInput that started the stream) makes tool calls the client
    already holds count as started, so a result answering one of them is valid.
    """
    checker = _Checker(())
    if run_input is not None:
        checker.known_from_input(event_as_json(run_input))
    raws = [event_as_json(event) for event in events]
    for index, raw in enumerate(raws):
        checker.check(index, raw)
    checker.finish(len(raws))
    return checker.findings
