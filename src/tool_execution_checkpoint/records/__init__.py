"""Immutable checkpoint records and their persisted JSON form (schema version 1).

Every record type checks itself when it is built, so an instance is valid by construction
and a record read from storage is validated exactly once, by :meth:`Checkpoint.from_dict`.
The persisted form uses language-neutral camelCase names; spec/record.schema.json
describes it.

A result payload is kept as its compact JSON text, which makes a record deeply immutable
and keeps the payload exactly as it was completed; :attr:`Result.payload` decodes a fresh
copy on each access.

Two modules: :mod:`.parts` (the binding, the claims and the result) and
:mod:`.checkpoint` (the record, and :class:`StoredRecord`, a record as a store read it).
"""

from .checkpoint import (
    Checkpoint,
    StoredRecord,
    checked_checkpoint,
    stored_record,
    within_payload_limit,
)
from .parts import (
    Binding,
    Delivery,
    Execution,
    Result,
    Uncertainty,
    _stored_result,  # noqa: F401 - a Result pickled before the split names it here
    checked_delivery,
    checked_execution,
    checked_result,
    checked_uncertainty,
    first_part,
    mask_of_parts,
    present_mask,
)

__all__ = [
    "Binding",
    "Checkpoint",
    "Delivery",
    "Execution",
    "Result",
    "StoredRecord",
    "Uncertainty",
    "checked_checkpoint",
    "checked_delivery",
    "checked_execution",
    "checked_result",
    "checked_uncertainty",
    "first_part",
    "mask_of_parts",
    "present_mask",
    "stored_record",
    "within_payload_limit",
]
