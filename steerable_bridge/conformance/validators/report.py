"""Validator reports: one `Check` per graded behaviour, and the three ways to show them.

Every validator in this package (the ACP client validator, `check acp`, `check agui`) ends
with a `Report`: an ordered tuple of `Check(id, status, evidence)` where status is `pass`,
`fail`, `warn` or `skipped`, and evidence is one sentence a developer can act on (what was
sent, what came back, or why the check could not run). `warn` is for a deviation from the
letter of a spec that the official SDKs themselves make, so no agent built on one could
pass it: it is reported (and named in the tally) but does not fail the target. The report
renders as a Markdown summary table (shown to the person in the editor and printed by the
CLI), as JSON (`to_json`, the format `--report PATH` writes) and as JUnit XML
(`to_junit_xml`, for CI dashboards). This module does no I/O except `write_report`, and
never decides a verdict itself.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from steerable_bridge.runtime.errors import CodedError

__all__ = [
    "Check",
    "CheckStatus",
    "CouldNotRun",
    "Report",
    "checks_from_findings",
    "report_from_json",
    "write_report",
]

CheckStatus = Literal["pass", "fail", "warn", "skipped"]


class CouldNotRun(CodedError):
    """The target could not be checked at all (exit status 2); the message names the remedy."""

    code = "could_not_run"

    def __init__(self, message: str) -> None:
        super().__init__("could_not_run", message)


_STATUSES: tuple[CheckStatus, ...] = ("pass", "fail", "warn", "skipped")


@dataclass(frozen=True, slots=True)
class Check:
    """One graded behaviour: a stable id, its verdict, and the evidence for it."""

    id: str
    status: CheckStatus
    evidence: str

    def __post_init__(self) -> None:
        if self.status not in _STATUSES:
            raise ValueError(f"check {self.id}: status must be one of {_STATUSES}")


@dataclass(frozen=True, slots=True)
class Report:
    """What one validator run found about one target (a client, an agent or an endpoint)."""

    validator: str
    target: str
    checks: tuple[Check, ...] = field(default_factory=tuple)

    def count(self, status: CheckStatus) -> int:
        return sum(1 for check in self.checks if check.status == status)

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.status == "fail")

    @property
    def ok(self) -> bool:
        """True when no check failed (skipped checks do not count against the target)."""
        return not self.failed

    def exit_code(self) -> int:
        """0 when clean, 1 when any check failed (2, could not run, is the caller's)."""
        return 0 if self.ok else 1

    def summary_line(self) -> str:
        warned = f" {self.count('warn')} warned," if self.count("warn") else ""
        return (
            f"{self.validator} on {self.target}: {self.count('pass')} passed,"
            f" {self.count('fail')} failed,{warned} {self.count('skipped')} skipped"
        )

    def to_markdown(self) -> str:
        """The summary table: check id, result, evidence; failures first in the tally line."""
        rows = ["| check | result | evidence |", "|---|---|---|"]
        for check in self.checks:
            mark = {"pass": "pass", "fail": "**FAIL**", "warn": "warn", "skipped": "skipped"}[
                check.status
            ]
            rows.append(f"| `{check.id}` | {mark} | {_cell(check.evidence)} |")
        return "\n".join([f"**{self.summary_line()}**", "", *rows])

    def to_text(self) -> str:
        """A plain listing for terminals: one line per check, the tally last."""
        width = max((len(check.id) for check in self.checks), default=0)
        lines = [
            f"{check.status.upper():<7} {check.id:<{width}}  {check.evidence}"
            for check in self.checks
        ]
        return "\n".join([*lines, self.summary_line()])

    def to_json(self) -> str:
        payload = {
            "validator": self.validator,
            "target": self.target,
            "summary": {status: self.count(status) for status in _STATUSES},
            "checks": [
                {"id": check.id, "status": check.status, "evidence": check.evidence}
                for check in self.checks
            ],
        }
        return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"

    def to_junit_xml(self) -> str:
        """JUnit XML: one testsuite, one testcase per check (failure / skipped children)."""
        suite = ET.Element(
            "testsuite",
            name=self.validator,
            tests=str(len(self.checks)),
            failures=str(self.count("fail")),
            errors="0",
            skipped=str(self.count("skipped")),
        )
        ET.SubElement(
            ET.SubElement(suite, "properties"), "property", name="target", value=self.target
        )
        for check in self.checks:
            case = ET.SubElement(suite, "testcase", classname=self.validator, name=check.id)
            if check.status == "fail":
                failure = ET.SubElement(case, "failure", message=check.evidence, type="fail")
                failure.text = check.evidence
            elif check.status == "skipped":
                ET.SubElement(case, "skipped", message=check.evidence)
            elif check.status == "warn":  # JUnit has no warning: a pass that says so
                ET.SubElement(case, "system-out").text = f"warning: {check.evidence}"
            else:
                ET.SubElement(case, "system-out").text = check.evidence
        root = ET.Element("testsuites")
        root.append(suite)
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def report_from_json(text: str) -> Report:
    """Read back what `Report.to_json` wrote (used by tests and by tools comparing runs)."""
    data = json.loads(text)
    checks = tuple(Check(c["id"], c["status"], c["evidence"]) for c in data["checks"])
    return Report(data["validator"], data["target"], checks)


def write_report(report: Report, path: str | Path, *, junit: bool = False) -> list[Path]:
    """Write `report` as JSON to `path`; with `junit`, also JUnit XML beside it (`.xml`).

    Returns the paths written. The JUnit file replaces the JSON suffix with `.xml`
    (`report.json` → `report.xml`); a path without a suffix gets `.xml` appended.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(report.to_json(), encoding="utf-8")
    written = [target]
    if junit:
        xml_path = (
            target.with_suffix(".xml")
            if target.suffix != ".xml"
            else target.with_name(target.name + ".junit.xml")
        )
        xml_path.write_text(report.to_junit_xml(), encoding="utf-8")
        written.append(xml_path)
    return written


def checks_from_findings(
    findings: Sequence[object], *, clean_id: str, clean_evidence: str
) -> list[Check]:
    """Conformance findings as failed checks named by rule id, or one passing check if none.

    A finding is anything with `rule_id`, `message` and `where` attributes (the conformance
    package's `Finding`); several findings of one rule become one check listing each place.
    """
    if not findings:
        return [Check(clean_id, "pass", clean_evidence)]
    grouped: dict[str, list[str]] = {}
    for finding in findings:
        rule_id = str(getattr(finding, "rule_id", "unknown-rule"))
        where = getattr(finding, "where", "")
        message = str(getattr(finding, "message", finding))
        grouped.setdefault(rule_id, []).append(f"at {where}: {message}" if where else message)
    checks = []
    for rule_id, places in grouped.items():
        shown = "; ".join(places[:3])
        more = f" (and {len(places) - 3} more)" if len(places) > 3 else ""
        checks.append(Check(rule_id, "fail", shown + more))
    return checks


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
