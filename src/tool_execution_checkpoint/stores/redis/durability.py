"""What ``check_durability`` makes of a server's persistence settings: the report, the
problems each weak setting causes, and the ``on_weak`` policy."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ...errors import CheckpointError, ErrorCode
from .errors import RedisDurabilityError, RedisDurabilityWarning

__all__ = ["SETTINGS", "DurabilityReport", "OnWeak", "apply_policy", "check_on_weak", "merged"]

OnWeak = Literal["raise", "warn", "ignore"]

SETTINGS = ("appendonly", "appendfsync", "no-appendfsync-on-rewrite", "maxmemory-policy")
"""The settings ``check_durability`` reads (CONFIG GET), in order."""


@dataclass(frozen=True, slots=True)
class DurabilityReport:
    """The server's persistence settings as ``check_durability`` read them.

    ``problems`` says, for each setting that breaks the storage contract, what can be
    lost and what to set; it is empty when acknowledged writes survive a crash of the
    server and of its machine."""

    appendonly: str | None
    appendfsync: str | None
    no_appendfsync_on_rewrite: str | None
    maxmemory_policy: str | None
    problems: tuple[str, ...]

    @property
    def durable(self) -> bool:
        """True when no setting breaks the contract."""
        return not self.problems

    @classmethod
    def of(cls, settings: Mapping[str, str | None]) -> DurabilityReport:
        """The report on ``settings`` (each of :data:`SETTINGS`, None when the server
        does not know it)."""
        return cls(
            settings["appendonly"],
            settings["appendfsync"],
            settings["no-appendfsync-on-rewrite"],
            settings["maxmemory-policy"],
            tuple(_problems(settings)),
        )

    @classmethod
    def unread(cls, code: str) -> DurabilityReport:
        """The report when the server refused CONFIG GET with error ``code``."""
        problem = (
            f"cannot read the persistence settings: the server refused CONFIG GET "
            f"({code}); check appendonly yes, appendfsync always and "
            "maxmemory-policy noeviction with the server's operator"
        )
        return cls(None, None, None, None, (problem,))


def _problems(settings: Mapping[str, str | None]) -> list[str]:
    problems = []
    appendonly = settings["appendonly"]
    fsync = settings["appendfsync"]
    if appendonly != "yes":
        problems.append(
            f"appendonly is {appendonly}: without the append-only file a crash or "
            "restart loses every write since the last snapshot; set appendonly yes"
        )
    if fsync == "everysec":
        problems.append(
            "appendfsync is everysec: a crash of the machine (or of the server while "
            "the disk is slow) can lose about the last two seconds of acknowledged "
            "writes, a won claim among them; set appendfsync always"
        )
    elif fsync != "always":
        problems.append(
            f"appendfsync is {fsync}: the operating system flushes the append-only file "
            "when it likes (often every 30 s), so a machine crash loses acknowledged "
            "writes; set appendfsync always"
        )
    if settings["no-appendfsync-on-rewrite"] == "yes":
        problems.append(
            "no-appendfsync-on-rewrite is yes: fsync is skipped while the append-only "
            "file is rewritten; set no-appendfsync-on-rewrite no"
        )
    policy = settings["maxmemory-policy"]
    if policy is not None and policy.startswith("allkeys-"):
        problems.append(
            f"maxmemory-policy is {policy}: the server may evict checkpoint records, and "
            "an evicted claimed record is re-created as ready and its tool run again; "
            "set maxmemory-policy noeviction"
        )
    return problems


def merged(reports: Sequence[tuple[str, DurabilityReport]]) -> DurabilityReport:
    """One report for a cluster: a setting is shown when every master agrees on it
    (None otherwise), and every master's problems are listed under its name."""

    def agreed(values: list[str | None]) -> str | None:
        return values[0] if values and len(set(values)) == 1 else None

    problems = [f"{name}: {problem}" for name, report in reports for problem in report.problems]
    if not reports:
        problems.append("the cluster's slot map names no master")
    return DurabilityReport(
        agreed([report.appendonly for _, report in reports]),
        agreed([report.appendfsync for _, report in reports]),
        agreed([report.no_appendfsync_on_rewrite for _, report in reports]),
        agreed([report.maxmemory_policy for _, report in reports]),
        tuple(problems),
    )


def apply_policy(report: DurabilityReport, on_weak: OnWeak) -> DurabilityReport:
    """``report``, after raising :class:`RedisDurabilityError` or warning
    :class:`RedisDurabilityWarning` (as ``on_weak`` says) when it is not durable."""
    if report.durable or on_weak == "ignore":
        return report
    message = "the Redis server's settings do not make writes durable: " + "; ".join(
        report.problems
    )
    if on_weak == "raise":
        raise RedisDurabilityError(message)
    warnings.warn(message, RedisDurabilityWarning, stacklevel=3)
    return report


def check_on_weak(on_weak: object) -> OnWeak:
    """``on_weak``, or CheckpointError INVALID_ARGUMENT when it is not a policy."""
    if on_weak not in ("raise", "warn", "ignore"):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            'must be "raise", "warn" or "ignore"',
            field="on_weak",
        )
    return on_weak
