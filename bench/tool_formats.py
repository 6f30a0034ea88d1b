"""Recovery figures on the text tool-call corpus (`tests/runtime/data/tool_formats/`).

Streams every case through the recovery filter at each adversarial splitting (the whole
text, every single cut, 1-character pieces, 3-7-character pieces) and prints, per
splitting kind: calls recovered with exactly the expected arguments (a run counts only
when all its calls match) out of the calls expected over all runs, runs of positives whose
visible text holds markup (and how many markup characters), negatives that ran a call,
and runs whose visible text or reasoning differs from what is expected.

    uv run python bench/tool_formats.py
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.runtime.tool_corpus import CASES, fragments, leaks, run

Splitter = Callable[[str], list[list[str]]]
KINDS: dict[str, Splitter] = {
    "whole": lambda text: [[text]],
    "every cut": lambda text: [[text[:i], text[i:]] for i in range(1, len(text))],
    "1-char": lambda text: [list(text)],
    "3-7-char": lambda text: [fragments(text, 3, 7, seed) for seed in range(5)],
}


def main() -> None:
    expected = sum(len(case["calls"]) for case in CASES.values())
    negatives = sum(1 for case in CASES.values() if case["must_not_run"])
    print(f"{len(CASES)} cases, {expected} expected calls, {negatives} must-not-run negatives")
    for kind, split in KINDS.items():
        runs = recovered = wanted = leaked = leak_chars = ran = wrong = 0
        for case in CASES.values():
            for chunks in split(case["text"]):
                runs += 1
                shown, reasoning, calls = run(chunks)
                wanted += len(case["calls"])
                if calls == case["calls"]:
                    recovered += len(calls)
                if case["calls"] and leaks(shown):
                    leaked += 1
                    leak_chars += leaks(shown)
                if case["must_not_run"] and calls:
                    ran += 1
                if shown != case["shown"] or reasoning != case["reasoning"]:
                    wrong += 1
        print(
            f"  {kind:9s} {runs:6,} runs: {recovered:,}/{wanted:,} calls recovered"
            f" (exact arguments), {leaked} leaking runs ({leak_chars} markup chars),"
            f" {ran} negatives run, {wrong} runs with other text or reasoning"
        )


if __name__ == "__main__":
    main()
