"""`AgentConfig` and `new_id` (`runtime/agent_sessions/agent_config.py`): ids are the
prefix, an underscore and 16 hex digits, never repeating; the config's defaults are what an
agent gets when built without one (a fresh `LoopSettings` using `new_id`, approval `ask`),
it is frozen, and `agent.py` re-exports both names."""

from __future__ import annotations

import dataclasses
import re

import pytest

from steerable_bridge.runtime.agent_sessions import agent
from steerable_bridge.runtime.agent_sessions.agent_config import AgentConfig, new_id


def test_an_id_is_the_prefix_and_sixteen_hex_digits() -> None:
    assert re.fullmatch(r"msg_[0-9a-f]{16}", new_id("msg"))
    assert new_id("run").startswith("run_")


def test_ids_do_not_repeat() -> None:
    assert len({new_id("x") for _ in range(1000)}) == 1000


def test_the_defaults() -> None:
    config = AgentConfig()
    assert (config.model, config.approval) == ("demo:default", "ask")
    assert (config.max_sessions, config.session_ttl_s, config.advisories) == (256, 600.0, ())
    assert re.fullmatch(r"run_[0-9a-f]{16}", config.loop.new_id("run"))
    assert AgentConfig().loop is not config.loop  # each config its own loop settings


def test_the_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        AgentConfig().model = "other"  # type: ignore[misc]
    assert dataclasses.replace(AgentConfig(), model="test:m").model == "test:m"


def test_the_agent_module_re_exports_both() -> None:
    assert agent.AgentConfig is AgentConfig and agent.new_id is new_id
