"""`steerable-bridge conformance`: run the conformance suite against this installed build.

Plays every scenario of the corpus through the runtime, then through the real transports —
a spawned `steerable-bridge acp` over stdio (with the `_steerable/event` channel) and the
AG-UI app on a local uvicorn — checks every transcript and stream against the rules and
every decoded story against the expected one, and round-trips generated sessions through
both renderers for the kinds no scenario produces — when `hypothesis` is installed (the
`conformance` extra); without it that part is skipped with a note and the run can pass.
Prints a kind-by-transport table (pass / fail with the failing rule and scenario; `n/a` where a
transport cannot carry a kind), with progress on stderr while it runs. `--json` prints the
same as JSON; `--markdown` prints docs/mapping.md and exits. Exit status 0 when everything
passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

__all__ = ["register"]

TRANSPORTS = ("acp", "acp-editor", "agui")
"""acp: the ACP process with the event channel; acp-editor: its editor-facing messages only;
agui: the AG-UI server."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "conformance", help="run the conformance suite against this build and print the table"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--markdown", action="store_true", help="print the mapping table (docs/mapping.md)"
    )
    parser.add_argument(
        "--scenario", action="append", default=[], help="run only this scenario (repeatable)"
    )
    parser.add_argument(
        "--examples", type=int, default=100, help="generated sessions per renderer (100)"
    )
    parser.set_defaults(func=main)


@dataclass(slots=True)
class Cell:
    """One kind on one transport: how often it passed, and the first failure."""

    passed: int = 0
    failure: str | None = None

    @property
    def status(self) -> str:
        if self.failure is not None:
            return f"fail: {self.failure}"
        return "pass" if self.passed else "-"


@dataclass(slots=True)
class Results:
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)
    scenarios: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What was not checked and why (the run still passes)."""

    def mark(self, kinds: set[str], transport: str, failure: str | None) -> None:
        for kind in kinds:
            cell = self.cells.setdefault((kind, transport), Cell())
            if failure is None:
                cell.passed += 1
            elif cell.failure is None:
                cell.failure = failure

    @property
    def ok(self) -> bool:
        return not self.problems and all(c.failure is None for c in self.cells.values())


def main(args: argparse.Namespace) -> int:
    if args.markdown:
        from steerable_bridge.conformance.mapping import markdown

        sys.stdout.write(markdown())
        return 0
    import anyio

    results = anyio.run(_run, args)
    if args.json:
        print(json.dumps(_as_json(results), indent=2))
    else:
        print(_table(results))
    return 0 if results.ok else 1


class _Progress:
    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.tty = sys.stderr.isatty()

    def show(self, what: str) -> None:
        """What runs now (a live line on a terminal; nothing otherwise)."""
        if self.tty:
            sys.stderr.write(f"\r\x1b[K[{self.done}/{self.total}] {what} ...")
            sys.stderr.flush()

    def step(self, what: str) -> None:
        """One more part done (a line per part when stderr is not a terminal)."""
        self.done += 1
        line = f"[{self.done}/{self.total}] {what} done"
        sys.stderr.write(f"\r\x1b[K{line}" if self.tty else line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _first_difference(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> str:
    for index, (a, b) in enumerate(zip(got, expected, strict=False)):
        if a != b:
            return f"story differs at event {index} ({b.get('kind')})"
    return f"story has {len(got)} events, expected {len(expected)}"


async def _run(args: argparse.Namespace) -> Results:
    from steerable_bridge.conformance.mapping import missing_rows
    from steerable_bridge.conformance.scenarios import load_scenarios

    results = Results()
    missing = missing_rows()
    if missing:
        results.problems.append(f"kinds without a mapping row: {', '.join(missing)}")
    scenarios = load_scenarios(args.scenario)
    if args.scenario and len(scenarios) != len(set(args.scenario)):
        results.problems.append(f"unknown scenario among {', '.join(args.scenario)}")
    total = sum(1 + len(s.transports) for s in scenarios) + 1
    progress = _Progress(total)
    for scenario in scenarios:
        await _scenario(scenario, results, progress)
    progress.show("round-tripping generated sessions")
    _generated(results, args.examples)
    progress.step("generated sessions")
    progress.close()
    return results


async def _scenario(scenario: Any, results: Results, progress: _Progress) -> None:
    from steerable_bridge.conformance.acp_rules import check_acp_transcript
    from steerable_bridge.conformance.agui_rules import check_agui_stream
    from steerable_bridge.conformance.decode_acp import decode_acp
    from steerable_bridge.conformance.decode_agui import decode_agui
    from steerable_bridge.conformance.live import run_acp, run_agui
    from steerable_bridge.conformance.mapping import acp_exact
    from steerable_bridge.conformance.scenarios import normalize, run_in_process

    kinds = {e["kind"] for e in scenario.expected}
    record: dict[str, Any] = {"name": scenario.name, "results": {}}
    results.scenarios.append(record)

    def outcome(transport: str, failure: str | None, covered: set[str]) -> None:
        record["results"][transport] = failure or "pass"
        results.mark(
            covered, transport, None if failure is None else f"{failure} ({scenario.name})"
        )

    progress.show(f"{scenario.name}: runtime")
    try:
        local = normalize(await run_in_process(scenario))
        failure = (
            None if local == scenario.expected else _first_difference(local, scenario.expected)
        )
    except Exception as error:  # report, keep going
        failure = f"error {type(error).__name__}: {error}"
    record["results"]["runtime"] = failure or "pass"
    if failure is not None:
        results.problems.append(f"{scenario.name}: the runtime {failure}")
    progress.step(f"{scenario.name}: runtime")
    if "acp" in scenario.transports:
        progress.show(f"{scenario.name}: acp (stdio)")
        try:
            transcript = await run_acp(scenario, channel=True)
            findings = check_acp_transcript(transcript)
            decoded = decode_acp(transcript)
            plain = decode_acp(transcript, channel=False)
            story = normalize(decoded)
            if findings:
                failure = findings[0].rule_id
            elif story != scenario.expected:
                failure = _first_difference(story, scenario.expected)
            else:
                failure = None
            exact = [e for e in decoded if acp_exact(e)]
            editor = None if [e for e in plain if acp_exact(e)] == exact else "editor decode"
            outcome("acp", failure, kinds)
            outcome("acp-editor", editor or failure, {e.kind for e in exact})
        except Exception as error:
            outcome("acp", f"error {type(error).__name__}", kinds)
        progress.step(f"{scenario.name}: acp")
    if "agui" in scenario.transports:
        progress.show(f"{scenario.name}: agui (http)")
        try:
            run = await run_agui(scenario)
            findings = [
                f
                for x in run.exchanges
                for f in check_agui_stream(x.events, run_input=x.run_input)
                if not (x.disconnected and f.rule_id == "agui.one-terminal")
            ]
            story = normalize(decode_agui(run.received))
            expected = scenario.expected
            if run.cut:  # the client disconnected: the wire shows a prefix, the log the rest
                story = story + expected[len(story) :] if story == expected[: len(story)] else story
            logged = normalize(run.log)
            if findings:
                failure = findings[0].rule_id
            elif story != expected:
                failure = _first_difference(story, expected)
            elif logged != expected:
                failure = "server log: " + _first_difference(logged, expected)
            else:
                failure = None
            outcome("agui", failure, kinds)
        except Exception as error:
            outcome("agui", f"error {type(error).__name__}", kinds)
        progress.step(f"{scenario.name}: agui")


GENERATED_SKIPPED = (
    "generated sessions were skipped: hypothesis is not installed; install"
    " steerable-bridge[conformance] (e.g. uv tool install 'steerable-bridge[conformance]')"
    " to round-trip them too"
)


def _generated(results: Results, examples: int) -> None:
    """Round-trip generated sessions through both renderers (needs hypothesis)."""
    try:
        from hypothesis import HealthCheck, given, settings
    except ImportError:
        results.notes.append(GENERATED_SKIPPED)
        return
    from steerable_bridge.conformance.acp_rules import check_acp_transcript
    from steerable_bridge.conformance.acp_wire import render_acp_transcript
    from steerable_bridge.conformance.agui_rules import check_agui_stream
    from steerable_bridge.conformance.agui_wire import render_agui_stream
    from steerable_bridge.conformance.decode_acp import decode_acp
    from steerable_bridge.conformance.decode_agui import decode_agui
    from steerable_bridge.conformance.grammar import sessions
    from steerable_bridge.conformance.mapping import acp_exact, row
    from steerable_bridge.transports.acp.renderer import AcpRenderer

    def _v125_renderer() -> AcpRenderer:
        return AcpRenderer(notices=True, compaction=True)

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(sessions())
    def check(events: list[Any]) -> None:
        kinds = {e.kind for e in events}
        stream = render_agui_stream(events)
        findings = check_agui_stream(stream)
        failure = findings[0].rule_id if findings else None
        if failure is None and decode_agui(stream) != events:
            failure = "decode (generated)"
        results.mark(kinds, "agui", failure)
        transcript = render_acp_transcript(events, channel=True)
        findings = check_acp_transcript(transcript)
        failure = findings[0].rule_id if findings else None
        if failure is None and decode_acp(transcript) != events:
            failure = "decode (generated)"
        results.mark(kinds, "acp", failure)
        plain = [e for e in decode_acp(transcript, channel=False) if acp_exact(e)]
        exact = [e for e in events if acp_exact(e)]
        results.mark({e.kind for e in exact}, "acp-editor", None if plain == exact else "decode")
        # an editor that advertised the v1.25 session capabilities also sees these kinds
        v125 = render_acp_transcript(events, renderer=_v125_renderer)
        failure = next((f.rule_id for f in check_acp_transcript(v125)), None)
        shown = [e for e in decode_acp(v125, channel=False) if acp_exact(e, compaction=True)]
        wanted = [e for e in events if acp_exact(e, compaction=True)]
        if failure is None and shown != wanted:
            failure = "decode (session.compaction)"
        results.mark({e.kind for e in wanted if row(e.kind).capability}, "acp-editor", failure)

    try:
        check()
    except Exception as error:
        results.problems.append(f"generated sessions: {type(error).__name__}: {error}")


def _cell(results: Results, kind: str, transport: str) -> str:
    from steerable_bridge.conformance.mapping import row

    cell = results.cells.get((kind, transport))
    needs = row(kind).capability
    if transport == "acp-editor" and needs and cell is None:  # this run's client lacks it
        return f"n/a (session.{needs})"
    if transport == "acp-editor" and not row(kind).acp_exact:
        if row(kind).acp_shown:
            return "meaning"
        return "n/a (channel)"
    return cell.status if cell is not None else "-"


def _table(results: Results) -> str:
    from steerable_bridge.runtime.events import KINDS

    header = ("kind", *TRANSPORTS)
    rows = [header] + [(kind, *(_cell(results, kind, t) for t in TRANSPORTS)) for kind in KINDS]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    passed = sum(1 for s in results.scenarios if all(v == "pass" for v in s["results"].values()))
    lines.append("")
    lines.append(f"scenarios: {passed}/{len(results.scenarios)} passed on every path they run on")
    for problem in results.problems:
        lines.append(f"problem: {problem}")
    for note in results.notes:
        lines.append(f"note: {note}")
    lines.append("conformance: " + ("PASS" if results.ok else "FAIL"))
    return "\n".join(lines)


def _as_json(results: Results) -> dict[str, Any]:
    from steerable_bridge.runtime.events import KINDS

    return {
        "ok": results.ok,
        "kinds": {kind: {t: _cell(results, kind, t) for t in TRANSPORTS} for kind in KINDS},
        "scenarios": results.scenarios,
        "problems": results.problems,
        "notes": results.notes,
    }
