"""The chat page's pure helpers, run by node straight from `static/` (ES modules, no build):
the diff preview of file writes and edits, and the JSON Patch of STATE_DELTA."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

STATIC = Path(__file__).resolve().parents[3] / "steerable_bridge" / "transports" / "agui" / "static"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's modules"),
]


def _node(module: str, expression: str) -> Any:
    program = (
        f"const m = await import({json.dumps((STATIC / module).as_uri())});"
        f" console.log(JSON.stringify({expression}));"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", program],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_file_write_previews_its_lines_and_an_edit_what_it_replaces() -> None:
    write = _node("cards.js", 'm.diffOf("write_file", {path: "a.txt", content: "one\\ntwo\\n"})')
    edit = _node(
        "cards.js",
        'm.diffOf("edit_file", {path: "a.txt", old_text: "x = 1", new_text: "x = 2\\ny"})',
    )
    other = _node("cards.js", 'm.diffOf("calculate", {expression: "1"})')
    assert write == [{"sign": "+", "text": "one"}, {"sign": "+", "text": "two"}]
    assert edit == [
        {"sign": "-", "text": "x = 1"},
        {"sign": "+", "text": "x = 2"},
        {"sign": "+", "text": "y"},
    ]
    assert other is None


def test_state_deltas_apply_as_json_patch() -> None:
    ops = [
        {"op": "add", "path": "/items/-", "value": 3},
        {"op": "replace", "path": "/n", "value": 2},
        {"op": "move", "from": "/old", "path": "/new"},
        {"op": "remove", "path": "/items/0"},
    ]
    doc = {"items": [1, 2], "n": 1, "old": "v"}
    result = _node("patch.js", f"m.applyPatch({json.dumps(doc)}, {json.dumps(ops)})")
    assert result == {"items": [2, 3], "n": 2, "new": "v"}
