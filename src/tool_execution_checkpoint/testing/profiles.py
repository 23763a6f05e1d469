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
    """How many examples the protocol harness runs and how many steps each may take
    (``max_examples``, ``stateful_step_count``), and the same for the store-contract
    state machine (``contract_examples``, ``contract_steps``)."""

    name: str
    max_examples: int
    stateful_step_count: int
    contract_examples: int = 40
    contract_steps: int = 30


PROFILES = {
    profile.name: profile
    for profile in (
        HarnessProfile("ci", 100, 40, contract_examples=20, contract_steps=30),
        HarnessProfile("default", 300, 50, contract_examples=40, contract_steps=30),
        HarnessProfile("thorough", 5_000, 100, contract_examples=1_000, contract_steps=60),
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
