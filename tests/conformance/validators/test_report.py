"""Validator reports: the summary table, JSON and JUnit XML say the same thing."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from steerable_bridge.conformance.findings import Finding
from steerable_bridge.conformance.validators.report import (
    Check,
    Report,
    checks_from_findings,
    report_from_json,
    write_report,
)

pytestmark = pytest.mark.timeout(10)

REPORT = Report(
    "acp-client-validator",
    "Some Editor 1.2",
    (
        Check("update.plan", "pass", "sent plan; answered in 2 ms"),
        Check("permission.option_offered", "fail", "selected 'x|y', which was not offered"),
        Check("terminal.create", "skipped", "client did not advertise terminal"),
    ),
)


def test_counts_and_exit_code() -> None:
    assert (REPORT.count("pass"), REPORT.count("fail"), REPORT.count("skipped")) == (1, 1, 1)
    assert REPORT.exit_code() == 1
    assert Report("v", "t", (Check("a", "skipped", "why"),)).exit_code() == 0
    with pytest.raises(ValueError, match="status must be one of"):
        Check("a", "maybe", "?")  # type: ignore[arg-type]


def test_markdown_table_has_one_row_per_check_and_escapes_pipes() -> None:
    table = REPORT.to_markdown()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == 3
    assert "| `permission.option_offered` | **FAIL** | selected 'x\\|y'" in table
    assert "1 passed, 1 failed, 1 skipped" in table


def test_json_round_trips_and_junit_marks_failures_and_skips(tmp_path: Path) -> None:
    written = write_report(REPORT, tmp_path / "out" / "report.json", junit=True)
    assert [p.name for p in written] == ["report.json", "report.xml"]
    assert report_from_json(written[0].read_text()) == REPORT
    suite = ET.parse(written[1]).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["permission.option_offered"].find("failure") is not None
    assert cases["terminal.create"].find("skipped") is not None
    assert cases["update.plan"].find("failure") is None


def test_findings_become_failed_checks_grouped_by_rule() -> None:
    findings = [
        Finding(rule_id="agui.text-not-open", message="no open message", where="event 3"),
        Finding(rule_id="agui.text-not-open", message="no open message", where="event 5"),
        Finding(rule_id="agui.first-event", message="starts with TEXT", where="event 0"),
    ]
    checks = checks_from_findings(findings, clean_id="agui.rules", clean_evidence="clean")
    assert [(c.id, c.status) for c in checks] == [
        ("agui.text-not-open", "fail"),
        ("agui.first-event", "fail"),
    ]
    assert "event 3" in checks[0].evidence and "event 5" in checks[0].evidence
    assert checks_from_findings([], clean_id="agui.rules", clean_evidence="clean") == [
        Check("agui.rules", "pass", "clean")
    ]


def test_junit_without_a_report_path_is_a_configuration_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from steerable_bridge.cli import main

    assert main(["acp", "--validate-client", "--junit"]) == 2
    assert "--junit needs --report PATH" in capsys.readouterr().err
