"""Fault injection around any store: failed writes, ambiguous commits and failed reads."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from ..records import Checkpoint
from ..stores.core import (
    CheckpointStore,
    OutcomeUnknownError,
    StoreNotAppliedError,
    StoreUnavailableError,
)

__all__ = ["Fault", "FaultyStore", "InjectedReadError", "InjectedWriteError"]


class Fault(enum.Enum):
    """What the next store operation suffers. NONE comes first so that Hypothesis shrinks
    towards fault-free runs."""

    NONE = "none"
    WRITE_FAILS = "write fails"
    """A write raises before it reaches the store: it is not applied."""
    WRITE_AMBIGUOUS = "write ambiguous"
    """A write is applied, then raises (the commit's reply was lost)."""
    READ_FAILS = "read fails"
    """A read raises."""


class InjectedWriteError(StoreNotAppliedError):
    """An injected failure of a write that was not applied."""


class InjectedAmbiguousWriteError(OutcomeUnknownError):
    """An injected failure of a write that was applied."""


class InjectedReadError(StoreUnavailableError):
    """An injected failure of a read."""


class FaultyStore:
    """Wraps a store; ``arm(fault)`` makes the next matching operation fail that way.

    After each write, :attr:`last_write_applied` says what really happened (True, False
    or None when the write never reached the store) and :attr:`last_write_result` the
    inner store's answer, so a harness can keep a model in step even when the caller
    only saw an exception.
    """

    def __init__(self, inner: CheckpointStore) -> None:
        self.inner = inner
        self._armed = Fault.NONE
        self.last_write_result: bool | None = None

    def arm(self, fault: Fault) -> None:
        """Make the next operation that ``fault`` applies to fail."""
        self._armed = fault

    def _take(self, *kinds: Fault) -> Fault:
        fault = self._armed
        if fault in kinds:
            self._armed = Fault.NONE
            return fault
        return Fault.NONE

    def _write(self, apply: Any) -> bool:
        self.last_write_result = None
        fault = self._take(Fault.WRITE_FAILS, Fault.WRITE_AMBIGUOUS)
        if fault is Fault.WRITE_FAILS:
            raise InjectedWriteError("injected: the write did not reach the store")
        result: bool = apply()
        self.last_write_result = result
        if fault is Fault.WRITE_AMBIGUOUS:
            raise InjectedAmbiguousWriteError("injected: the write's outcome was lost")
        return result

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Forward to the inner store, unless a write fault is armed."""
        return self._write(lambda: self.inner.create_if_absent(key, record))

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        """Forward to the inner store, unless a write fault is armed."""
        swap = self.inner.compare_and_swap
        return self._write(lambda: swap(key, expected_revision, record, durable=durable))

    def get(self, key: str) -> Mapping[str, Any] | None:
        """Forward to the inner store, unless a read fault is armed."""
        if self._take(Fault.READ_FAILS) is Fault.READ_FAILS:
            raise InjectedReadError("injected: the read failed")
        return self.inner.get(key)
