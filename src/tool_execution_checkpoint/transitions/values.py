"""The values the transitions take and return: a record as stored, a timestamp, a
:class:`Decision` and a :class:`Transition`."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple, TypeAlias

from ..records import Checkpoint
from ..table import Action, Status

__all__ = ["Decision", "RecordLike", "Timestamp", "Transition"]

RecordLike: TypeAlias = Checkpoint | Mapping[str, Any]
"""A record as a :class:`Checkpoint` or as the mapping loaded from storage (a
:class:`~tool_execution_checkpoint.records.StoredRecord` from this package's stores)."""

Timestamp: TypeAlias = str | datetime
"""An RFC 3339 str, or a timezone-aware datetime."""


class Decision(NamedTuple):
    """What a loaded record says to do for a binding: ``(action, status, revision,
    checkpoint)``.

    Attributes:
        action: The recovery action of the record's status (``execute`` only for ready).
        status: The record's status.
        revision: The record's revision: the expected revision of the next transition.
        checkpoint: The validated record, to pass on to the next transition.
    """

    action: Action
    status: Status
    revision: int
    checkpoint: Checkpoint


class Transition(NamedTuple):
    """The result of a transition, ``(action, expected_revision, next)``: act on it only
    after the store's compare-and-swap from ``expected_revision`` to ``next`` succeeded.

    Attributes:
        action: What a won swap grants: ``execute`` after claim_execution, ``deliver``
            after claim_delivery, ``none`` after the others.
        expected_revision: The revision the stored record must still have.
        next: The record to store, at ``expected_revision + 1``.
    """

    action: Action
    expected_revision: int
    next: Checkpoint
