"""`registry/steerable-bridge/`: the ACP registry entry is valid against the registry's
published schema (a copy in this folder) and passes the checks its CI adds: the id is the
folder's name, the uvx pin is this version, the icon is a 16x16 monochrome SVG."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from steerable_bridge import __version__

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "registry" / "steerable-bridge"
SCHEMA = json.loads((Path(__file__).parent / "agent.schema.json").read_text())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
THEMABLE = {"currentcolor", "none", "inherit"}


def load_entry() -> dict[str, Any]:
    entry: dict[str, Any] = json.loads((ENTRY / "agent.json").read_text())
    return entry


def test_agent_json_is_valid_against_the_registry_schema() -> None:
    entry = load_entry()
    assert [e.message for e in VALIDATOR.iter_errors(entry)] == []
    assert entry["id"] == ENTRY.name  # the registry requires the folder to be named by id
    assert entry["version"] == __version__
    uvx = entry["distribution"]["uvx"]
    assert uvx["package"] == f"steerable-bridge=={__version__}"  # pinned, never @latest
    assert uvx["args"] == ["acp"]


@pytest.mark.parametrize(
    "broken",
    [
        {"id": "Steerable Bridge"},
        {"version": "latest"},
        {"distribution": {}},
        {"distribution": {"pip": {"package": "steerable-bridge"}}},
    ],
)
def test_the_schema_copy_rejects_what_the_registry_rejects(broken: dict[str, Any]) -> None:
    assert list(VALIDATOR.iter_errors({**load_entry(), **broken}))


def test_the_icon_is_a_16x16_monochrome_svg() -> None:
    text = (ENTRY / "icon.svg").read_text()
    root = ET.fromstring(text)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("16", "16", "0 0 16 16")
    paints: list[str] = []
    for element in root.iter():
        assert element.tag.rsplit("}", 1)[-1] in {"svg", "path", "g", "circle", "rect", "line"}
        paints += [element.get(k, "none") for k in ("fill", "stroke")]
        style = element.get("style", "")
        paints += re.findall(r"(?:fill|stroke)\s*:\s*([^;]+)", style)
    assert {p.strip().lower() for p in paints} <= THEMABLE
    assert "currentcolor" in {p.strip().lower() for p in paints}  # themed, not default black
