"""The settings model: defaults, one line per bad value, the CLI's start-up check, README."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from steerable_bridge import cli
from steerable_bridge.commands import settings as s
from steerable_bridge.commands.settings import (
    REGENERATE,
    PathSettings,
    ProviderSettings,
    SessionSettings,
    SettingsError,
    lenient_settings,
    load_settings,
    readme_block,
    readme_table,
    variables,
)

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_the_documented_ones_and_the_runtimes() -> None:
    from steerable_bridge.adapters.llm.deadlines import CallDeadlines
    from steerable_bridge.runtime.agent_sessions.agent import AgentConfig
    from steerable_bridge.transports.agui.head_guard import ConnectionLimits

    found = load_settings({})
    assert (found.agent.model, found.agent.approve, found.agent.quality) == (
        "demo:default",
        "ask",
        "auto",
    )
    assert (found.agent.model_deadline, found.agent.model_idle_timeout) == (
        CallDeadlines().call_s,
        CallDeadlines().idle_s,
    )
    config = AgentConfig()
    sessions = found.sessions
    assert (sessions.session_cache, sessions.session_ttl) == (
        config.max_sessions,
        config.session_ttl_s,
    )
    assert (sessions.tool_output_lines, sessions.tool_output_bytes) == (
        config.output_limits.max_lines,
        config.output_limits.max_bytes,
    )
    assert (sessions.compaction, sessions.compact_threshold, sessions.compact_micro_every) == (
        True,
        0.8,
        0,
    )
    limits = ConnectionLimits()
    serve = found.serve
    assert (serve.max_head, serve.head_timeout, serve.body_timeout) == (
        limits.max_head_bytes,
        limits.head_timeout_s,
        limits.body_timeout_s,
    )
    assert (serve.workers, serve.max_runs, serve.max_connections) == (1, 256, None)
    assert (found.tools.pass_env, found.tools.sandbox, found.tools.mcp_net) == ((), "auto", "allow")
    assert found.logs.level is None and found.logs.format == "text"
    assert found.providers.environ() == {}


def test_values_are_typed_and_blank_means_unset_where_it_always_did() -> None:
    found = load_settings(
        {
            "STEERABLE_SESSION_CACHE": "1_000",
            "STEERABLE_SESSION_TTL": " ",
            "STEERABLE_PASS_ENV": "A, B,,",
            "STEERABLE_MODEL_IMAGES": "No",
            "STEERABLE_LOG": "DEBUG",
            "STEERABLE_MAX_CONNECTIONS": "",
            "STEERABLE_ANTHROPIC_MODELS": "",
        }
    )
    assert found.sessions.session_cache == 1000 and found.sessions.session_ttl == 600.0
    assert found.tools.pass_env == ("A", "B")
    assert found.providers.model_images is False
    assert found.logs.level == "debug" and found.serve.max_connections is None
    assert found.providers.anthropic_models == ()  # set but empty: offer no Claude routes


@pytest.mark.parametrize(
    ("name", "value", "line"),
    [
        ("STEERABLE_APPROVE", "always", "STEERABLE_APPROVE='always': use ask, all or none"),
        ("STEERABLE_SANDBOX", "on", "STEERABLE_SANDBOX='on': use auto, require or off"),
        ("STEERABLE_LOG", "loud", "STEERABLE_LOG='loud': use debug, info, warning or error"),
        (
            "STEERABLE_SESSION_CACHE",
            "lots",
            "STEERABLE_SESSION_CACHE='lots' must be a whole number of sessions (at least 1)",
        ),
        (
            "STEERABLE_SESSION_TTL",
            "10m",
            "STEERABLE_SESSION_TTL='10m' must be a number of seconds above 0 (for example 600)",
        ),
        (
            "STEERABLE_MODEL_DEADLINE",
            "0",
            "--model-deadline / STEERABLE_MODEL_DEADLINE='0' must be a number of seconds above 0",
        ),
        (
            "STEERABLE_MAX_HEAD",
            "10",
            "--max-head / STEERABLE_MAX_HEAD='10' must be a whole number, at least 1,024",
        ),
        ("STEERABLE_MAX_RUNS", "-1", "--max-runs / STEERABLE_MAX_RUNS='-1' is not a number"),
        ("STEERABLE_WORKERS", "two", "--workers / STEERABLE_WORKERS='two' is not a number"),
        ("STEERABLE_COMPACTION", "maybe", "STEERABLE_COMPACTION='maybe' must be 1 or 0"),
        ("STEERABLE_COMPACT_THRESHOLD", "2", "STEERABLE_COMPACT_THRESHOLD='2' must be a share"),
        ("STEERABLE_COMPACT_MICRO_EVERY", "-1", "must be a whole number of steps (0: off)"),
        ("STEERABLE_DEMO_PACE_MS", "fast", "'fast' is not a number of milliseconds"),
        ("STEERABLE_MODEL_IMAGES", "maybe", "STEERABLE_MODEL_IMAGES='maybe' must be 1 or 0"),
        (
            "STEERABLE_THINKING_BUDGET",
            "100",
            "STEERABLE_THINKING_BUDGET='100' is not a whole number of tokens of at least 1024",
        ),
        ("STEERABLE_CONTEXT_WINDOW", "big", "set STEERABLE_CONTEXT_WINDOW to the model's"),
        ("STEERABLE_PROMPT_CACHE", "sometimes", "STEERABLE_PROMPT_CACHE='sometimes' must be on"),
        ("STEERABLE_PROMPT_CACHE_TTL", "1d", "STEERABLE_PROMPT_CACHE_TTL='1d' must be 5m"),
        ("OPENAI_BASE_URL", "localhost:11434", "OPENAI_BASE_URL='localhost:11434' is not an"),
    ],
)
def test_each_kind_of_bad_value_is_one_line_naming_variable_value_and_remedy(
    name: str, value: str, line: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({name: value})
    assert len(caught.value.problems) == 1
    assert line in caught.value.problems[0]
    assert caught.value.names == (name,)


def test_several_bad_values_are_several_lines() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(
            {
                "STEERABLE_APPROVE": "x",
                "STEERABLE_SESSION_CACHE": "0",
                "STEERABLE_MAX_HEAD": "big",
                "STEERABLE_LOG_FORMAT": "xml",
                "STEERABLE_MODEL": "openai:gpt-4o",
            }
        )
    names = caught.value.names
    assert sorted(names) == sorted(
        [
            "STEERABLE_APPROVE",
            "STEERABLE_SESSION_CACHE",
            "STEERABLE_MAX_HEAD",
            "STEERABLE_LOG_FORMAT",
        ]
    )
    assert str(caught.value).splitlines() == list(caught.value.problems)
    for name, line in zip(names, caught.value.problems, strict=True):
        assert name in line


def test_the_cli_stops_before_the_command_with_one_line_per_bad_value(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STEERABLE_APPROVE", "sometimes")
    monkeypatch.setenv("STEERABLE_COMPACT_THRESHOLD", "lots")
    monkeypatch.setenv("STEERABLE_STORAGE", "memory")
    assert cli.main(["run", "hello"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "steerable-bridge: STEERABLE_APPROVE='sometimes': use ask, all or none",
        "steerable-bridge: STEERABLE_COMPACT_THRESHOLD='lots' must be a share of the window"
        " between 0.1 and 1.0 (for example 0.8)",
    ]
    assert cli.main(["schema"]) == 0  # a command that reads no settings is not stopped


def test_option_defaults_come_from_the_settings_and_flags_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEERABLE_MODEL", "scripted:/x.json")
    monkeypatch.setenv("STEERABLE_MAX_HEAD", "4096")
    monkeypatch.setenv("STEERABLE_WORKERS", "3")
    monkeypatch.setenv("STEERABLE_LOG_FORMAT", "JSON")
    args = cli.build_parser("serve").parse_args(["serve"])
    assert (args.model, args.max_head, args.workers, args.log_format) == (
        "scripted:/x.json",
        "4096",
        3,
        "json",
    )
    args = cli.build_parser("serve").parse_args(["serve", "--model", "demo:default"])
    assert args.model == "demo:default"


def test_option_defaults_ignore_a_bad_value_which_the_start_up_check_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEERABLE_WORKERS", "two")  # used to end `--help` in a traceback
    args = cli.build_parser("serve").parse_args(["serve"])
    assert args.workers == 1
    assert lenient_settings().serve.workers == 1
    with pytest.raises(SettingsError, match="STEERABLE_WORKERS='two'"):
        load_settings()


def test_the_providers_get_the_variables_that_were_set_as_text() -> None:
    group = ProviderSettings.load(
        {
            "STEERABLE_BASE_URL": "http://127.0.0.1:11434/v1",
            "STEERABLE_MODEL_IMAGES": "false",
            "STEERABLE_CONTEXT_WINDOW": "8192",
            "STEERABLE_ANTHROPIC_MODELS": "a, b",
            "STEERABLE_PROMPT_CACHE": "off",
            "STEERABLE_API_KEY": "",
            "UNRELATED": "x",
        }
    )
    assert group.environ() == {
        "STEERABLE_BASE_URL": "http://127.0.0.1:11434/v1",
        "STEERABLE_MODEL_IMAGES": "0",
        "STEERABLE_CONTEXT_WINDOW": "8192",
        "STEERABLE_ANTHROPIC_MODELS": "a,b",
        "STEERABLE_PROMPT_CACHE": "0",
    }
    from steerable_bridge.adapters.llm.openai_compat import config_from_env

    config = config_from_env("m", group.environ())
    assert (config.base_url, config.accepts_images, config.context_window) == (
        "http://127.0.0.1:11434/v1",
        False,
        8192,
    )
    assert "api_key" not in repr(ProviderSettings.load({"STEERABLE_API_KEY": "sk-1"}))


def test_a_group_reads_the_process_environment_when_given_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEERABLE_SESSION_CACHE", "7")
    assert SessionSettings.load().session_cache == 7
    assert SessionSettings.load({}).session_cache == 256  # a mapping replaces it


def test_every_steerable_variable_in_the_source_is_a_setting_or_internal() -> None:
    internal = {
        "STEERABLE_SERVE_OPTIONS",  # serve's parent hands its options to its workers
        "STEERABLE_COMMAND_TAG",  # set on the processes a command starts, to find them
        "STEERABLE_META",  # a constant's name, not a variable
    }
    named = set()
    for path in (ROOT / "steerable_bridge").rglob("*.py"):
        named |= set(re.findall(r"[\"'](STEERABLE_[A-Z_]+)[\"']", path.read_text("utf-8")))
    assert named - internal - set(variables()) == set()


def test_readme_configuration_table_is_the_generated_one() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme_block(readme)
    assert block is not None, f"README.md lost the markers around the table; see {s.__name__}"
    assert block == readme_table(), (
        f"README.md's configuration table differs from the settings model; run `{REGENERATE}`"
    )
    assert s.with_table(readme) == readme


def test_the_state_folder_follows_an_absolute_xdg_state_home_only(tmp_path: Path) -> None:
    home = os.path.join(os.path.expanduser("~"), ".local", "state", "steerable-bridge")
    assert PathSettings.load({"XDG_STATE_HOME": str(tmp_path)}).state_dir() == str(
        tmp_path / "steerable-bridge"
    )
    assert PathSettings.load({"XDG_STATE_HOME": "relative/dir"}).state_dir() == home
    assert PathSettings.load({}).state_dir() == home
