"""The mapping table, as data: how each LoopEvent kind appears on the ACP and AG-UI wires.

One `KindMapping` row per kind in `runtime.events.KINDS`, joined from the two transports'
own tables (conformance may import the transports, not the reverse). The ACP side
(`transports/acp/mapping.py`, which the ACP renderer's dispatch reads too) says which form
the kind takes — a `session/update` variant, a client request (`session/request_permission`),
the `session/prompt` response (stop reason), a JSON-RPC error, a notification of its own
(`elicitation/complete`), or nothing but the opt-in `_steerable/event` channel — and whether
a decoder rebuilds it exactly from the editor-facing messages alone (`acp_exact`: every
field, thanks to `_meta.steerable`) or only its meaning (`acp_shown` but not exact: what the
client itself said — its prompt, its permission answer — without seq / ts; `meaning` names
the fields rebuilt). The AG-UI side (`transports/agui/mapping.py`, which its renderer, byte
fast path and this package's decoder read too) names the native event types (fields the
native event lacks ride in `metadata.steerable`) or the CUSTOM event `steerable.<kind>`
whose value is the whole event. Both decoders, the scenario comparison ("modulo the kinds a
transport cannot carry"), `docs/mapping.md` and the CLI read this table;
`tests/conformance/test_mapping.py` fails when a kind has no row.
"""

from __future__ import annotations

from dataclasses import dataclass

from steerable_bridge.runtime.events import KINDS, LoopEvent
from steerable_bridge.transports.acp.mapping import TABLE as ACP_TABLE
from steerable_bridge.transports.acp.mapping import AcpForm, AcpRow
from steerable_bridge.transports.agui.mapping import CUSTOM_NOTES
from steerable_bridge.transports.agui.mapping import by_kind as agui_row

__all__ = ["MAPPING", "AcpForm", "KindMapping", "acp_exact", "acp_shown", "markdown", "row"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KindMapping:
    """One kind's rendering on both wires."""

    kind: str
    acp_form: AcpForm
    acp: str
    """What the ACP message is (variant, method, field) — a short phrase for the docs."""
    acp_exact: bool
    """A decoder of the editor-facing messages (no event channel) rebuilds the event exactly."""
    agui: tuple[str, ...]
    """Native AG-UI event types, or ("CUSTOM",) for `steerable.<kind>`."""
    agui_note: str = ""
    meaning: tuple[str, ...] = ()
    """For kinds shown but not exact on ACP: the fields a decoder does rebuild."""
    capability: str = ""
    """The `clientCapabilities.session` key a client must advertise for an editor to see
    this kind (`compaction`); empty: every client sees it as the row says."""

    @property
    def acp_shown(self) -> bool:
        """An editor sees this kind without the event channel."""
        return self.acp_form != "event channel"


def _row(acp: AcpRow) -> KindMapping:
    native = agui_row(acp.kind)
    return KindMapping(
        kind=acp.kind,
        acp_form=acp.form,
        acp=acp.note,
        acp_exact=acp.exact,
        agui=native.types if native is not None else ("CUSTOM",),
        agui_note=native.note if native is not None else CUSTOM_NOTES.get(acp.kind, ""),
        meaning=acp.meaning,
        capability=acp.capability,
    )


MAPPING: tuple[KindMapping, ...] = tuple(_row(acp) for acp in ACP_TABLE)

_BY_KIND: dict[str, KindMapping] = {m.kind: m for m in MAPPING}


def row(kind: str) -> KindMapping:
    """The row for `kind`; KeyError names the kind when the table lacks it."""
    return _BY_KIND[kind]


def acp_exact(event: LoopEvent, *, compaction: bool = False) -> bool:
    """ACP's editor-facing messages carry this event exactly (no event channel needed);
    `compaction`: the client advertised `session.compaction` (a streamed compaction's
    start, pieces and drop reach only such a client)."""
    if event.kind in ("config_changed", "usage_updated"):
        return acp_shown(event)
    found = _BY_KIND[event.kind]
    if found.capability == "compaction" and not compaction:
        return False
    return found.acp_exact


def acp_shown(event: LoopEvent, *, compaction: bool = False) -> bool:
    """An editor sees this event (exactly, or by its meaning) without the event channel."""
    if _BY_KIND[event.kind].capability == "compaction" and not compaction:
        return False
    if event.kind == "config_changed":
        return getattr(event, "option_id", None) == "model"
    if event.kind == "usage_updated":  # `size` is required: no update while it is unknown
        return bool(getattr(event, "size", None))
    return _BY_KIND[event.kind].acp_shown


def markdown() -> str:
    """docs/mapping.md: the table as Markdown (generated; do not edit the file by hand)."""
    lines = [
        "# LoopEvent → ACP → AG-UI mapping",
        "",
        "Generated from `steerable_bridge/conformance/mapping.py` by"
        " `steerable-bridge conformance --markdown`; do not edit by hand.",
        "",
        "ACP *exact* means a decoder rebuilds the event field for field from the editor-facing"
        " messages (`_meta.steerable` carries seq, ts, run and what the ACP payload cannot hold)."
        " Kinds marked *meaning* are what the client itself said (its prompt, its permission"
        " answer): only their meaning is rebuilt. Kinds on"
        " the event channel reach only a client that sends `_meta: {steerable: {events: true}}`"
        " in `initialize`; with it, every kind is exact.",
        "",
        "AG-UI is lossless: native events carry missing fields in `metadata.steerable`; other"
        " kinds are `CUSTOM` events named `steerable.<kind>` whose value is the whole event"
        " (a `model_request` after the thread's first: what changed since the one before)."
        " Each run also ends with a derived `MESSAGES_SNAPSHOT` of the whole thread — left out"
        " when the client sent back every message of the thread, and when its `RunAgentInput`"
        " has `forwardedProps.steerable.snapshot: false` (a client that keeps its own history,"
        " or shows none, is spared the thread on every run; any value but true / false is"
        " refused with 422 `invalid_input`).",
        "",
        "AG-UI model requests: a thread's first `model_request` is the whole event; each later"
        " one carries what changed since the request before it in the thread's log (of this"
        " run or an earlier one, also after a server restart), so a run costs what it adds,"
        " not the whole thread again. Its value is the event with `request.messages` holding"
        " only the messages after the first `prefix` ones it shares with that request,"
        " `request.system` and `request.tools` left out when unchanged, and `request_ref` ="
        " `{base, prefix, messages, tokens, system, tools}`: the seq of the request it"
        " extends, the shared prefix, how many messages the whole request holds, its"
        " prompt-token estimate, and digests of its system prompt and tools (the first 16 hex"
        " digits of a SHA-256: of the prompt's UTF-8 bytes, and of the compact JSON"
        " `[[name, description, parameters_json], ...]`). A client rebuilds the request from"
        " the one it was sent before (`base`: the thread's previous request); one that"
        " joined mid-thread, or wants each request whole, sends"
        " `forwardedProps.steerable.full_requests: true` (any value but true / false is"
        " refused with 422 `invalid_input`). A stream resumed from an event id"
        " (`GET /agent/threads/{id}/events`) sends them by reference too.",
        "",
        "AG-UI client versions: a request whose `RunAgentInput.protocolVersion` is `1.0` or"
        " later (what `HttpAgent` from `@ag-ui/client` 1.0 sends) gets the 1.0 `RUN_FINISHED`"
        " outcomes: `success` with `pendingToolCallIds` when frontend tool calls wait for the"
        " client, and `cancelled`. A request without it (the 0.0.x clients, such as the"
        " `@ag-ui/client` 0.0.59 that CopilotKit 1.75 ships, validate the outcome strictly)"
        " gets only what every client version accepts: `success` without"
        " `pendingToolCallIds` (the client derives pending calls from the stream: tool calls"
        " with no `TOOL_CALL_RESULT`), no `outcome` at all for a cancelled run, and `interrupt`"
        " unchanged. `metadata.steerable` carries stop_reason and pending_tool_call_ids either"
        " way, so decoding is the same.",
        "",
        "Steering and follow-up, on both wires (logged as `steer_applied` /"
        " `follow_up_applied`): over ACP the extension methods `_steerable/steer` and"
        " `_steerable/follow_up` (`{sessionId, text}` → `{taken, reason}`), advertised with the"
        " event channel in `initialize`'s `agentCapabilities._meta.steerable`; over AG-UI a"
        " request for the running thread with `forwardedProps.steerable.steer: true` (joins the"
        " turn at its next step boundary; answered by a short run with CUSTOM"
        " `steerable.steer_absorbed`) or `forwardedProps.steerable.follow_up: true` (taken when"
        " the turn would otherwise end; CUSTOM `steerable.follow_up_queued`).",
        "",
        "Questions (the model's `ask_user` tool, ACP elicitation): over ACP the tool is offered"
        " only when the client advertised `clientCapabilities.elicitation.form` or `.url`; a"
        " form question is an `elicitation/create` request (mode `form`, `sessionId`,"
        " `toolCallId`, `message`, `requestedSchema`: a flat object of string / number /"
        " integer / boolean properties) and the answer (`accept` with `content`, `decline`,"
        ' `cancel`) is the call\'s result, `{"action": ..., "content": ...}` as text. A url'
        " question (`ask_user` with `url`: a sign-in or consent page, a document) is mode"
        " `url` with `elicitationId` = `<sessionId>/question-<call_id>` (unique on the"
        " connection) and the http(s) `url`, asked only"
        " of a client that advertised `elicitation.url` (otherwise a form with one boolean"
        " `done` field and the page in the message); once the person accepted, the agent"
        " sends `elicitation/complete` for that id before the call's result. Over AG-UI the"
        " tool is always offered: the run ends with a RUN_FINISHED `interrupt` (id"
        " `question-<call_id>`, reason = the message, `toolCallId`, `responseSchema` ="
        " `{action: accept|decline|cancel, content: <the requested schema>}`; a url question"
        ' has `{action}` only and `metadata: {mode: "url", url}`), answered in the next run'
        " by `resume[]` (`payload: {action, content}`; status `cancelled` = cancel); the"
        " completion is CUSTOM `steerable.question_completed`.",
        "",
        "Notices and compactions (ACP schema 1.25): a client that advertises"
        " `clientCapabilities.session.notices: {}` in `initialize` gets `notice` updates"
        " (severity info / warning / error, title, description): automatic compaction paused by"
        " its breaker, commands that run without a sandbox (`--sandbox auto` without a working"
        " bubblewrap; once per session, in its first turn), a context window guessed from the"
        " model's name (once per session), and (not a LoopEvent: no turn"
        " runs) an MCP server that failed to start;"
        " any other client gets the same as an agent message. A client that advertises"
        " `session.compaction: {}` gets every compaction as `compaction_update` in_progress →"
        " `compaction_summary_chunk`s → `compaction_update` completed. A summary (manual"
        " `/compact`, pressure, overflow) streams while the model writes it: in_progress when"
        " the summary request starts (`compaction_started`), one chunk per piece"
        " (`compaction_summary_delta`; a model that does not stream gives one), then completed"
        " with `summary` = the stored summary (`compaction`), or cancelled / failed with"
        " `error` when it was not applied (`compaction_dropped`: cancelled mid-summary, or"
        " the summary would not have been smaller); the compactionId is the event's"
        " compaction_id. A micro fold (no model call) sends all three at once with"
        " compactionId `compaction-<seq>`. Any other client sees only the `compaction`'s"
        " headline as an agent message. AG-UI carries the same four kinds as CUSTOM"
        " `steerable.<kind>` events. Notices are live: logged (traces, `sessions"
        " timeline`), but `session/load` never replays them and AG-UI history leaves them out.",
        "",
        "| kind | ACP form | ACP rendering | ACP decode | AG-UI events | AG-UI notes |",
        "|---|---|---|---|---|---|",
    ]
    for m in MAPPING:
        decode = "exact" if m.acp_exact else ("meaning" if m.acp_shown else "channel only")
        agui = ", ".join(
            f"`{t}`" if t != "CUSTOM" else f"`CUSTOM steerable.{m.kind}`" for t in m.agui
        )
        lines.append(f"| `{m.kind}` | {m.acp_form} | {m.acp} | {decode} | {agui} | {m.agui_note} |")
    return "\n".join(lines) + "\n"


def missing_rows() -> list[str]:
    """Kinds of the taxonomy without a row (should be empty)."""
    return [kind for kind in KINDS if kind not in _BY_KIND]
