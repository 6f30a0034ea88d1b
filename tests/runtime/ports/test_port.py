"""The agent port (`runtime/ports/port.py`): `AgentPort` is the one surface both transports use,
so its implementation (`conversations.LocalPort`, which the bridges run behind too) must
offer every method with the same parameters, kinds and defaults; the values it hands out
have the documented defaults — `Attachments` with nobody to ask defers permissions and
questions and still offers `ask_user`, `PortInfo` advertises every capability unless an
engine says otherwise. What `LocalPort` does is pinned in `test_conversations.py`."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from steerable_bridge.runtime.agent_sessions.conversations import LocalPort
from steerable_bridge.runtime.ports import port as port_module
from steerable_bridge.runtime.ports.port import AgentPort, Attachments, Conversation, PortInfo
from steerable_bridge.runtime.ports.questions import QUESTION_MODES

PORT_METHODS = sorted(
    name
    for name, _ in inspect.getmembers(AgentPort, inspect.isfunction)
    if not name.startswith("_")
)


def test_the_port_names_every_operation_a_transport_needs() -> None:
    assert set(PORT_METHODS) >= {
        "info", "open", "load", "fork", "list", "close", "delete", "prompt", "cancel",
        "steer", "follow_up", "set_mode", "set_model", "events_after", "replay_after",
    }  # fmt: skip


@pytest.mark.parametrize("name", PORT_METHODS)
def test_local_port_implements_each_method_with_the_same_signature(name: str) -> None:
    wanted = getattr(AgentPort, name)
    given = getattr(LocalPort, name)
    assert inspect.iscoroutinefunction(given) == inspect.iscoroutinefunction(wanted), name
    ours = inspect.signature(wanted).parameters
    theirs = inspect.signature(given).parameters
    assert list(theirs) == list(ours), name
    for param, spec in ours.items():
        assert (theirs[param].kind, theirs[param].default) == (spec.kind, spec.default), param


def test_attachments_with_nobody_to_ask_defer_and_still_offer_questions() -> None:
    attachments = Attachments()
    assert attachments.asker is None and attachments.questioner is None
    assert attachments.questions and attachments.question_modes == QUESTION_MODES
    assert attachments.environment is None and attachments.tools == ()


def test_port_info_advertises_every_capability_by_default() -> None:
    info = PortInfo(name="x", version="1", default_model="m", models=("m",), modes=())
    assert info.can_load and info.can_fork and info.can_list and info.can_steer
    assert info.tools == ()


def test_a_new_conversation_is_idle_with_nothing_open() -> None:
    conversation = Conversation(conversation_id="c", cwd="/w", model="m", mode="default")
    assert not conversation.running and conversation.last_seq == -1
    assert conversation.open_calls == () and conversation.open_questions == ()
    assert conversation.title is None and conversation.state is None


@pytest.mark.parametrize("cls", [Attachments, Conversation, PortInfo])
def test_the_ports_values_are_frozen(cls: type) -> None:
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and all(f.kw_only for f in dataclasses.fields(cls))


def test_the_port_re_exports_coalesced_for_replay() -> None:
    from steerable_bridge.runtime.session_log.replay import Coalesced

    assert port_module.Coalesced is Coalesced
