"""Findings: what a conformance check reports, and the error that carries them.

Every check in this package is a named rule with a stable id (`agui.text-not-open`,
`acp.cancel-stop-reason`, ...). A check never stops at the first problem: it returns one
`Finding` per violation, each saying which rule, what was wrong, and where (an index into
the stream or transcript, plus the event type or method). `ConformanceError` is raised by
the `assert_*` helpers with every finding in its message, so a failing test shows the whole
story at once. `Rule` rows are the catalogue the CLI and the docs print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from steerable_bridge.runtime.errors import CodedError

__all__ = ["ConformanceError", "Finding", "Rule"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One named check: a stable id and one sentence saying what it requires."""

    id: str
    requires: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One violation of one rule at one place."""

    rule_id: str
    message: str
    where: str

    def __str__(self) -> str:
        return f"[{self.rule_id}] at {self.where}: {self.message}"


class ConformanceError(CodedError, AssertionError):
    """A stream or transcript broke one or more rules; `findings` lists every one (an
    `AssertionError` too, so a test that checks a stream fails, not errors)."""

    code = "conformance_failed"

    def __init__(self, what: str, findings: Sequence[Finding]) -> None:
        self.findings: tuple[Finding, ...] = tuple(findings)
        lines = "\n".join(f"  {finding}" for finding in self.findings)
        super().__init__(
            "conformance_failed",
            f"{what} broke {len(self.findings)} conformance rule(s); fix the producer so each"
            f" rule below holds:\n{lines}",
        )
