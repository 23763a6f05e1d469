"""A check shared by the adapters whose tool decorator goes through ``checkpointed``: a
return type the guard cannot keep is refused, and neither the refusal nor its chain
(causes and contexts) names the type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tool_execution_checkpoint import CheckpointError, ErrorCode
from tool_execution_checkpoint.testing.conformance import leaks

SECRET = "AdapterChainSecret"


class AdapterChainSecretOpaque:
    """A return type pydantic cannot store; its name must show nowhere in the chain."""


def unresolvable() -> AdapterChainSecretMissing:  # type: ignore[name-defined]  # noqa: F821
    raise AssertionError("never run")


def opaque() -> AdapterChainSecretOpaque:
    raise AssertionError("never run")


def assert_unkeepable_return_types_leave_no_chain(decorate: Callable[[Any], object]) -> None:
    """The guard's refusals were once raised inside the ``except``: the NameError and
    pydantic's error, each naming the type, stayed as their ``__context__``."""
    for tool, says in ((unresolvable, "cannot be resolved"), (opaque, "pydantic cannot store")):
        with pytest.raises(CheckpointError) as refused:
            decorate(tool)
        assert refused.value.code is ErrorCode.INVALID_ARGUMENT
        assert says in str(refused.value)
        assert leaks(refused.value, SECRET) is None, says
        assert (refused.value.__context__, refused.value.__cause__) == (None, None)
