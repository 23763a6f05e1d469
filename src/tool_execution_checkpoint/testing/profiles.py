"""Example budgets for the harness, chosen by the TOOL_CHECKPOINT_HARNESS variable.

``ci`` is quick, ``default`` is what a plain test run uses, ``thorough`` is for a long run
before a release or after changing a store::

    TOOL_CHECKPOINT_HARNESS=thorough pytest -k harness
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["PROFILES", "HarnessProfile", "active_profile"]

ENVIRONMENT_VARIABLE = "TOOL_CHECKPOINT_HARNESS"


@dataclass(frozen=True)
class HarnessProfile:
    """How many examples the harness runs, and how many steps each may take."""

    name: str
    max_examples: int
    stateful_step_count: int


PROFILES = {
    profile.name: profile
    for profile in (
        HarnessProfile("ci", max_examples=100, stateful_step_count=40),
        HarnessProfile("default", max_examples=300, stateful_step_count=50),
        HarnessProfile("thorough", max_examples=5_000, stateful_step_count=100),
    )
}


def active_profile() -> HarnessProfile:
    """The profile named by TOOL_CHECKPOINT_HARNESS (``default`` when unset)."""
    name = os.environ.get(ENVIRONMENT_VARIABLE, "default")
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(
            f"{ENVIRONMENT_VARIABLE} must be one of {sorted(PROFILES)}, not {name!r}"
        ) from None
