"""`check acp`: our own agent passes, a deliberately broken one fails with the expected ids."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from steerable_bridge.cli import main as cli_main
from steerable_bridge.conformance.validators.agent_probes import AgentCheckSettings, CouldNotRun
from steerable_bridge.conformance.validators.check_acp import check_acp_agent

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

BROKEN = str(Path(__file__).with_name("broken_acp_agent.py"))
QUICK = AgentCheckSettings(prompt_timeout=30, cancel_timeout=5, probe_timeout=1, quiet_period=0.3)


async def test_a_bad_permission_flow_fails_the_permission_checks() -> None:
    settings = AgentCheckSettings(
        prompt_timeout=30, cancel_timeout=5, probe_timeout=1, quiet_period=0.3,
        tool_prompt="[tool] write the file",
    )  # fmt: skip
    report = await check_acp_agent([sys.executable, BROKEN], settings=settings)
    got = {c.id: c for c in report.checks}
    assert got["agent.tool_prompt"].status == "pass", report.to_text()
    assert got["agent.permission.request"].status == "fail"
    assert "repeats an optionId" in got["agent.permission.request"].evidence
    assert got["agent.permission.resolved"].status == "fail"
    assert "write-1" in got["agent.permission.resolved"].evidence
    # It ignores session/cancel even while its permission request is pending.
    assert got["agent.cancel.permission"].status == "fail"
    assert "stopReason 'end_turn'" in got["agent.cancel.permission"].evidence
    # It wrote by a relative path (refused) and never released its terminal.
    assert got["agent.client.fs"].status == "fail"
    assert got["agent.client.terminal"].status == "fail"
    assert "notes.txt" in got["acp.fs-path"].evidence
    assert "never released" in got["acp.terminal-released"].evidence


async def test_without_a_tool_prompt_the_permission_checks_say_how_to_run_them() -> None:
    report = await check_acp_agent([sys.executable, BROKEN], settings=QUICK)
    got = {c.id: c for c in report.checks}
    for check_id in ("agent.tool_prompt", "agent.permission.request", "agent.permission.resolved"):
        assert got[check_id].status == "skipped"
        assert "--tool-prompt" in got[check_id].evidence


async def test_our_own_agent_passes_every_check(tmp_path: Path) -> None:
    env = {**os.environ, "STEERABLE_DEMO_PACE_MS": "20"}
    record = tmp_path / "transcript.jsonl"
    report = await check_acp_agent(
        [sys.executable, "-m", "steerable_bridge.cli", "acp"],
        env=env,
        settings=QUICK,
        record=record,
    )
    assert report.failed == (), report.to_text()
    got = {c.id: c.status for c in report.checks}
    for check_id in (
        "agent.initialize.schema",
        "agent.session.new",
        "agent.prompt",
        "agent.prompt.nothing_after_response",
        "agent.cancel.stop_reason",
        "agent.unknown_method",
        "agent.malformed_json.parse_error",
        "agent.malformed_json.alive",
        "agent.session.load",
        "agent.session.resume",
        "transcript.rules",
    ):
        assert got.get(check_id) == "pass", (check_id, report.to_text())
    lines = record.read_text().splitlines()
    assert len(lines) > 20 and any('"raw"' in line for line in lines)


async def test_a_broken_agent_fails_with_the_expected_ids() -> None:
    report = await check_acp_agent([sys.executable, BROKEN], settings=QUICK)
    failed = {c.id for c in report.failed}
    assert failed == {
        "agent.initialize.schema",
        "agent.initialize.version",
        "agent.prompt.nothing_after_response",
        "agent.cancel.stop_reason",
        "agent.cancel.nothing_after_response",
        "agent.unknown_extension_method",
        "agent.session.load",
        "agent.session.load.mode",
        "agent.session.resume",
        "acp.after-response",
        "acp.cancel-stop-reason",
        "acp.resume-replay",
        "acp.load-keeps-mode",
    }, report.to_text()
    assert report.exit_code() == 1
    # It drops a broken JSON line without answering, as the official TS and Python SDKs do:
    # a warning (no agent on those SDKs could pass), not a failure.
    warned = {c.id for c in report.checks if c.status == "warn"}
    assert warned == {"agent.malformed_json.parse_error"}, report.to_text()
    passed = {c.id for c in report.checks if c.status == "pass"}
    assert {"agent.unknown_method", "agent.malformed_json.alive", "agent.prompt"} <= passed


async def test_an_agent_without_credentials_is_skipped_with_its_reason() -> None:
    report = await check_acp_agent([sys.executable, BROKEN, "--needs-key"], settings=QUICK)
    skipped = {c.id: c.evidence for c in report.checks if c.status == "skipped"}
    assert "agent needs credentials it lacks" in skipped["agent.prompt"]
    assert "EXAMPLE_API_KEY" in skipped["agent.prompt"]
    assert "agent.cancel.stop_reason" in skipped
    report = await check_acp_agent([sys.executable, BROKEN, "--needs-login"], settings=QUICK)
    got = {c.id: c.status for c in report.checks}
    assert got["agent.session.new"] == "skipped"
    assert got["agent.prompt"] == got["agent.session.load"] == "skipped"
    assert got["agent.unknown_method"] == "pass"  # probes that need no session still run


async def test_an_agent_that_cannot_start_could_not_run(tmp_path: Path) -> None:
    with pytest.raises(CouldNotRun, match="could not start"):
        await check_acp_agent([str(tmp_path / "no-such-agent")], settings=QUICK)
    with pytest.raises(CouldNotRun, match="exited with status 3 before answering initialize"):
        await check_acp_agent([sys.executable, "-c", "raise SystemExit(3)"], settings=QUICK)


def test_the_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["check", "acp", "--", str(tmp_path / "missing")]) == 2
    assert "could not run" in capsys.readouterr().err
    assert cli_main(["check", "acp"]) == 2
    report = tmp_path / "r.json"
    code = cli_main(
        [
            "check",
            "acp",
            "--probe-timeout",
            "1",
            "--report",
            str(report),
            "--junit",
            "--",
            sys.executable,
            BROKEN,
            "--needs-key",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL    agent.initialize.version" in out
    assert "SKIPPED agent.prompt" in out
    assert report.exists() and report.with_suffix(".xml").exists()


CHATTY = str(Path(__file__).with_name("chatty_acp_agent.py"))


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status  # ended, waiting for init to reap it


async def test_legal_session_updates_after_responses_are_not_failures(tmp_path: Path) -> None:
    """Session-level updates after responses, session news before the turn's first text,
    a launcher that leaves a child running: all legal, none a failure; the child is ended."""
    pid_file = tmp_path / "child.pid"
    record = tmp_path / "transcript.jsonl"
    report = await check_acp_agent(
        [sys.executable, CHATTY, "--launcher"],
        env={**os.environ, "CHATTY_CHILD_PID": str(pid_file)},
        settings=QUICK,
        record=record,
    )
    # The SDK's agent side drops a broken JSON line without the -32700 JSON-RPC asks for:
    # the one finding, a warning since every agent on the official Python SDK does so.
    assert report.failed == (), report.to_text()
    warned = {c.id for c in report.checks if c.status == "warn"}
    assert warned == {"agent.malformed_json.parse_error"}, report.to_text()
    got = {c.id: c for c in report.checks}
    for check_id in (
        "agent.prompt.nothing_after_response",
        "agent.cancel.stop_reason",
        "agent.cancel.nothing_after_response",
        "agent.session.load",
        "agent.session.resume",
        "transcript.rules",
    ):
        assert got[check_id].status == "pass", got[check_id]
    assert "after its first agent_message_chunk" in got["agent.cancel.stop_reason"].evidence
    lines = record.read_text().splitlines()
    assert any("usage_update" in line for line in lines)  # they were sent, and allowed
    child = int(pid_file.read_text())
    assert _gone(child), "the launcher's child outlived the check"


async def test_an_upstream_failure_reported_as_an_error_could_not_be_checked() -> None:
    report = await check_acp_agent([sys.executable, CHATTY, "--upstream-error"], settings=QUICK)
    got = {c.id: c for c in report.checks}
    prompt = got["agent.prompt"]
    assert prompt.status == "skipped" and prompt.evidence.startswith("could not check")
    assert "provider answered 503: model overloaded" in prompt.evidence  # data.details kept
    assert got["agent.cancel.stop_reason"].status == "skipped"
    assert "agent.prompt" not in {c.id for c in report.failed}


async def test_every_check_appears_in_the_report_and_skips_say_why() -> None:
    report = await check_acp_agent([sys.executable, BROKEN, "--needs-login"], settings=QUICK)
    from steerable_bridge.conformance.validators.check_acp import AGENT_CHECKS

    ids = [c.id for c in report.checks]
    assert set(AGENT_CHECKS) - {"agent.initialize"} <= set(ids)
    assert all(c.evidence for c in report.checks if c.status == "skipped")


@pytest.mark.parametrize(
    ("code", "message", "data", "expected"),
    [
        (-32000, "Authentication required", None, True),
        (-32603, "Internal error", {"details": "OPENAI_API_KEY is not set"}, True),
        (-32603, "request failed", {"details": "401 Unauthorized"}, True),
        (-32603, "Not logged in · Please run /login", None, True),
        (-32603, "invalid token", None, True),
        (-32603, "prompt is 200000 tokens, over the context window", None, False),
        (-32603, "max_tokens must be positive", None, False),
        (-32603, "the author field is required", None, False),
        (-32603, "OAuth callback server crashed", {"details": "EADDRINUSE"}, False),
    ],
)
def test_the_credential_heuristic_is_narrow(
    code: int, message: str, data: object, expected: bool
) -> None:
    from acp import RequestError

    from steerable_bridge.conformance.validators.agent_probes import needs_credentials

    assert needs_credentials(RequestError(code, message, data)) is expected
