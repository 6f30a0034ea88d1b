"""Reads and searches that cannot hang, over-allocate or outlive their caller: FIFOs, sockets
and devices are refused before they are opened, a window of an enormous line is cut, a
runaway pattern answers, and cancelled work stops."""

from __future__ import annotations

import io
import os
import shutil
import socket
import threading
from pathlib import Path

import anyio
import pytest

from steerable_bridge.adapters.tools import search
from steerable_bridge.adapters.tools.local_env import LocalEnvironment
from steerable_bridge.adapters.tools.paths import Workspace
from steerable_bridge.adapters.tools.reading import read_window
from steerable_bridge.adapters.tools.stoppable import run_stoppable
from steerable_bridge.runtime.ports.environment import WorkspaceError

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

HAS_RG = shutil.which("rg") is not None


def window(data: bytes, **options: int | None) -> bytes:
    settings: dict[str, int | None] = {
        "first": 1,
        "limit": None,
        "max_bytes": 1000,
        "max_line_bytes": 100,
    }
    settings.update(options)
    return read_window(
        io.BufferedReader(io.BytesIO(data), buffer_size=64),  # type: ignore[arg-type]
        first=settings["first"] or 1,
        limit=settings["limit"],
        max_bytes=settings["max_bytes"] or 0,
        max_line_bytes=settings["max_line_bytes"] or 0,
    )


def test_a_window_skips_keeps_and_cuts_lines() -> None:
    data = b"one\ntwo\n" + b"x" * 5000 + b"\nfour\nfive"
    assert window(data, first=2, limit=1) == b"two\n"
    assert window(data, first=4) == b"four\nfive"
    cut = window(data, first=3, limit=2)
    assert cut.startswith(b"x" * 100 + b" [line 3 is longer than 100 bytes")
    assert cut.endswith(b"cut]\nfour\n") and len(cut) < 200
    capped = window(b"".join(b"%d\n" % i for i in range(1000)), max_bytes=50)
    assert capped.startswith(b"0\n1\n") and b"[stopped after 50 bytes" in capped
    assert len(capped) < 150


async def test_a_window_of_an_enormous_line_holds_only_its_start(
    local_env: LocalEnvironment, project: Path
) -> None:
    with (project / "one.txt").open("w") as handle:
        handle.write("y" * (20 * 1024 * 1024) + "\nnext\n")
    text = await local_env.read_text(str(project / "one.txt"), line=1, limit=2)
    assert len(text) < local_env.max_line_bytes + 200
    assert text.endswith("the rest is cut]\nnext\n")


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
async def test_special_files_are_refused_before_they_can_block(
    local_env: LocalEnvironment, project: Path, kind: str
) -> None:
    target = project / kind
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "socket":
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(target))
    else:
        target.symlink_to("/dev/zero")  # resolved inside-out: the device itself is refused
        target = Path("/dev/zero")
        local_env = LocalEnvironment(Workspace.of(str(project), ["/dev"]))
    with anyio.fail_after(10):  # a safety bound: an open of the FIFO would block for ever
        with pytest.raises(WorkspaceError) as read:
            await local_env.read_text(str(target), line=1, limit=1)
        with pytest.raises(WorkspaceError) as whole:
            await local_env.read_text(str(target))
        with pytest.raises(WorkspaceError) as write:
            await local_env.write_text(str(target), "x")
    assert read.value.code == whole.value.code == write.value.code == "not_a_regular_file"
    assert "not a regular file" in read.value.message
    if kind == "socket":
        listener.close()


@pytest.mark.parametrize(
    "use_rg", [pytest.param(True, marks=pytest.mark.skipif(not HAS_RG, reason="no rg")), False]
)
async def test_grep_refuses_a_fifo_path_and_skips_fifos_in_folders(
    project: Path, workspace: Workspace, use_rg: bool
) -> None:
    os.mkfifo(project / "src" / "pipe")
    with anyio.fail_after(10):
        with pytest.raises(WorkspaceError) as info:
            await search.grep(workspace, "x", "src/pipe", None, use_ripgrep=use_rg)
        found = await search.grep(workspace, "return", "src", None, use_ripgrep=use_rg)
    assert info.value.code == "not_a_regular_file"
    assert [line.split(":")[0] for line in found.lines] == ["src/app.py"]


@pytest.mark.parametrize(
    "use_rg", [pytest.param(True, marks=pytest.mark.skipif(not HAS_RG, reason="no rg")), False]
)
async def test_a_runaway_pattern_answers_and_look_around_is_refused(
    project: Path, workspace: Workspace, use_rg: bool
) -> None:
    (project / "evil.txt").write_text("a" * 200_000 + "b\n" + "aaa\n")
    with anyio.fail_after(20):  # `re` would backtrack on (a+)+$ for longer than the universe
        found = await search.grep(workspace, "(a+)+$", "evil.txt", None, use_ripgrep=use_rg)
        with pytest.raises(WorkspaceError) as info:
            await search.grep(workspace, r"(a)\1", ".", None, use_ripgrep=use_rg)
    assert [line.rsplit(":", 1)[1] for line in found.lines] == ["aaa"]
    assert info.value.code == "unsupported_pattern" and "backreferences" in info.value.message


async def test_a_glob_that_would_backtrack_answers(project: Path, workspace: Workspace) -> None:
    (project / ("a" * 200)).write_text("")
    with anyio.fail_after(20):
        found = await search.glob_files(workspace, "*a*a*a*a*a*a*a*a*a*a*b", ".")
    assert found.lines == ()


async def test_cancelled_thread_work_is_told_to_stop() -> None:
    stopped = threading.Event()

    def work(stop: threading.Event) -> None:
        stop.wait(30)  # stands in for a read that checks its flag between pieces
        if stop.is_set():
            stopped.set()

    with anyio.move_on_after(0.1):  # the caller gives up (a tool timeout, a client gone)
        await run_stoppable(work)
    # The caller left at once; the thread ends right after (a safety bound on the wait).
    assert await anyio.to_thread.run_sync(stopped.wait, 10)
