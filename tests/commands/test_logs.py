"""Log lines for people and for machines: ids of the turn on every record, tracebacks kept."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator

import pytest

from steerable_bridge.commands.logs import add_log_options, configure_logging
from steerable_bridge.runtime.turns import logcontext


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_log_options(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_the_ids_and_the_traceback(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(_parse("--log-format", "json", "--log-level", "info"))
    log = logging.getLogger("steerable_bridge.test")
    log.info("outside any turn")
    with logcontext.bind("sess_1", trace_id="ab" * 16) as context:
        context.run_id = "run_7"
        try:
            raise ValueError("broken")
        except ValueError:
            log.exception("it failed")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert lines[0]["message"] == "outside any turn" and lines[0]["session_id"] is None
    failed = lines[1]
    assert failed["level"] == "error" and failed["logger"] == "steerable_bridge.test"
    assert (failed["session_id"], failed["run_id"], failed["trace_id"]) == (
        "sess_1",
        "run_7",
        "ab" * 16,
    )
    assert "ValueError: broken" in failed["exc_info"] and "Traceback" in failed["exc_info"]


def test_text_lines_show_the_ids_when_known(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(_parse("--log-level", "warning"))
    log = logging.getLogger("steerable_bridge.test")
    log.info("hidden below the level")
    with logcontext.bind("sess_2"):
        log.warning("inside")
    log.warning("outside")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert err[0].endswith("steerable_bridge.test [session=sess_2]: inside")
    assert err[1].endswith("steerable_bridge.test: outside")
