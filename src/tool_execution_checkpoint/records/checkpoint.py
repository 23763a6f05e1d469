"""The record itself: :class:`Checkpoint`, its persisted JSON form, and
:class:`StoredRecord`, a record as a store read it (see
:mod:`tool_execution_checkpoint.records`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import CheckpointError, ErrorCode
from ..table import TABLE, Status
from ..validation import check_max_payload_bytes, check_timestamp
from .parts import (
    _DEFAULT_MAX_PAYLOAD_BYTES,
    _INVALID,
    _PART_BITS,
    Binding,
    Delivery,
    Execution,
    Result,
    _check_keys,
    _json_text,
    _quote,
    first_part,
    mask_of_parts,
    present_mask,
)

__all__ = ["Checkpoint", "StoredRecord"]

_NOT_JSON: Any = object()

_SHAPES: Mapping[Status, tuple[int, int]] = {
    status: (mask_of_parts(rule.required), mask_of_parts(rule.forbidden))
    for status, rule in TABLE.statuses.items()
}
"""Each status's required and forbidden parts, as masks."""


_TOP_KEYS = frozenset(
    {
        "schemaVersion",
        "revision",
        "status",
        "binding",
        "createdAt",
        "updatedAt",
        "execution",
        "result",
        "delivery",
    }
)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One persisted checkpoint: a binding, its status and revision, and the parts that
    the status requires (see the status table in docs/spec.md).

    Build one with :func:`~tool_execution_checkpoint.create_checkpoint`, read one with
    :meth:`from_dict`, and get the next one from a transition. A Checkpoint checks its
    shape when it is built and raises INVALID_CHECKPOINT when the status and its parts
    disagree, so every instance is a valid record.
    """

    revision: int
    status: Status
    binding: Binding
    created_at: str
    updated_at: str
    execution: Execution | None = None
    result: Result | None = None
    delivery: Delivery | None = None

    schema_version: ClassVar[int] = TABLE.schema_version

    def __post_init__(self) -> None:
        if type(self.revision) is not int or not (
            TABLE.initial_revision <= self.revision <= TABLE.limits.max_revision
        ):
            raise CheckpointError(
                _INVALID,
                f"must be an int from {TABLE.initial_revision} to {TABLE.limits.max_revision}",
                field="revision",
                limit=TABLE.limits.max_revision,
            )
        if type(self.status) is not Status:
            raise CheckpointError(_INVALID, "must be a Status", field="status")
        if type(self.binding) is not Binding:
            raise CheckpointError(_INVALID, "must be a Binding", field="binding")
        for value, kind, name in (
            (self.execution, Execution, "execution"),
            (self.result, Result, "result"),
            (self.delivery, Delivery, "delivery"),
        ):
            if value is not None and type(value) is not kind:
                raise CheckpointError(_INVALID, f"must be a {kind.__name__}", field=name)
        check_timestamp(self.created_at, "createdAt", _INVALID)
        check_timestamp(self.updated_at, "updatedAt", _INVALID)
        self.check_shape()

    def present_parts(self) -> frozenset[str]:
        """The nullable parts (in persisted naming) that this record holds."""
        mask = present_mask(self.execution, self.result, self.delivery)
        return frozenset(part for part, bit in _PART_BITS.items() if mask & bit)

    def check_shape(self) -> None:
        """Raise INVALID_CHECKPOINT unless the parts present are those the status table
        requires, and none it forbids."""
        required, forbidden = _SHAPES[self.status]
        mask = present_mask(self.execution, self.result, self.delivery)
        missing, extra = required & ~mask, mask & forbidden
        if missing:
            part = first_part(missing)
            raise CheckpointError(_INVALID, f"is required in status {self.status}", field=part)
        if extra:
            part = first_part(extra)
            raise CheckpointError(_INVALID, f"must be null in status {self.status}", field=part)

    def recheck(self, since: Checkpoint | None = None) -> None:
        """Run every check the validating constructors make, again, on this record and
        its parts; raise CheckpointError at the first that fails. The transitions build
        records from parts they checked one by one; their contracts call this to confirm
        that the whole record is one the constructors would accept. A part equal to one
        that ``since`` holds (the record it was made from, itself valid) is not checked
        again: equal values pass the same checks. (The payload's text is not parsed again: only
        ``complete_execution`` makes it, from a checked value, and the payload promise
        guards it afterwards.)"""
        self.__post_init__()  # revision, status, part types, timestamps, shape
        kept = (since.binding, since.execution, since.result, since.delivery) if since else ()
        if self.binding not in kept:
            self.binding.__post_init__()
        execution, result, delivery = self.execution, self.result, self.delivery
        if execution is not None and execution not in kept:
            execution.__post_init__()
            if execution.uncertain is not None:
                execution.uncertain.__post_init__()
        if delivery is not None and delivery not in kept:
            delivery.__post_init__()
        if result is not None and result not in kept:
            check_timestamp(result.completed_at, "result.completedAt", _INVALID)
            if result.pruned_at is not None:
                check_timestamp(result.pruned_at, "result.prunedAt", _INVALID)

    def to_dict(self) -> dict[str, Any]:
        """Return the persisted form: a fresh JSON-ready dict in schema version 1."""
        return {
            "schemaVersion": self.schema_version,
            "revision": self.revision,
            "status": self.status.value,
            "binding": self.binding._to_json(),
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "execution": self.execution._to_json() if self.execution is not None else None,
            "result": self.result._to_json() if self.result is not None else None,
            "delivery": self.delivery._to_json() if self.delivery is not None else None,
        }

    def to_json(self) -> str:
        """Return the persisted form as compact UTF-8-ready JSON text: the text of compact
        ``json.dumps(self.to_dict(), ensure_ascii=False)``, key order included, written
        field by field (the stored payload's compact text is spliced in, not decoded and
        encoded again)."""
        result = self.result
        if result is None:
            result_text = "null"
        else:
            result_text = (
                f'{{"payload":{result.payload_json},'
                f'"completedAt":{_quote(result.completed_at)},'
                f'"prunedAt":{_json_text(result.pruned_at)}}}'
            )
        return (
            f'{{"schemaVersion":{self.schema_version},"revision":{self.revision},'
            f'"status":{_quote(self.status)},"binding":{self.binding._json_text()},'
            f'"createdAt":{_quote(self.created_at)},"updatedAt":{_quote(self.updated_at)},'
            f'"execution":{_json_text(self.execution)},"result":{result_text},'
            f'"delivery":{_json_text(self.delivery)}}}'
        )

    @classmethod
    def from_dict(
        cls, raw: object, *, max_payload_bytes: int = _DEFAULT_MAX_PAYLOAD_BYTES
    ) -> Checkpoint:
        """Read and fully validate a persisted record.

        Raises:
            CheckpointError: UNSUPPORTED_SCHEMA for an integer schemaVersion other than 1;
                INVALID_CHECKPOINT for anything structurally wrong; PAYLOAD_NOT_JSON or
                PAYLOAD_LIMIT_EXCEEDED for a stored payload that breaks a payload rule or
                limit (pass the same ``max_payload_bytes`` the record was completed with);
                INVALID_ARGUMENT for a bad ``max_payload_bytes``.
        """
        limit = check_max_payload_bytes(max_payload_bytes)
        if type(raw) is StoredRecord and not raw._changed:  # validated when it was read
            return within_payload_limit(raw.checkpoint, limit)
        if not isinstance(raw, Mapping):
            raise CheckpointError(_INVALID, "a record must be a mapping")
        version = raw.get("schemaVersion")
        if type(version) is not int:
            raise CheckpointError(_INVALID, "must be an int", field="schemaVersion")
        if version != cls.schema_version:
            raise CheckpointError(
                ErrorCode.UNSUPPORTED_SCHEMA,
                f"this library reads schema version {cls.schema_version} only",
                field="schemaVersion",
            )
        _check_keys(raw, _TOP_KEYS, None)
        try:
            status = Status(raw["status"]) if type(raw["status"]) is str else None
        except ValueError:
            status = None
        if status is None:
            raise CheckpointError(_INVALID, "is not a known status", field="status")
        execution, result, delivery = raw["execution"], raw["result"], raw["delivery"]
        return cls(
            revision=raw["revision"],
            status=status,
            binding=Binding._from_json(raw["binding"], "binding"),
            created_at=raw["createdAt"],
            updated_at=raw["updatedAt"],
            execution=None if execution is None else Execution._from_json(execution, "execution"),
            result=None if result is None else Result._from_json(result, "result", limit),
            delivery=None if delivery is None else Delivery._from_json(delivery, "delivery"),
        )

    @classmethod
    def from_json(
        cls, text: str | bytes, *, max_payload_bytes: int = _DEFAULT_MAX_PAYLOAD_BYTES
    ) -> Checkpoint:
        """Parse persisted JSON text and validate it as :meth:`from_dict` does.

        Raises:
            CheckpointError: INVALID_CHECKPOINT when the text is not JSON, and every error
                of :meth:`from_dict`.
        """
        try:
            raw = json.loads(text)
        except (ValueError, TypeError, RecursionError):  # a JSONDecodeError keeps the text
            raw = _NOT_JSON
        if raw is _NOT_JSON:  # raised outside the except: no context holds the text
            raise CheckpointError(_INVALID, "a record must be JSON text")
        return cls.from_dict(raw, max_payload_bytes=max_payload_bytes)


def checked_checkpoint(
    revision: int,
    status: Status,
    binding: Binding,
    created_at: str,
    updated_at: str,
    *,
    execution: Execution | None = None,
    result: Result | None = None,
    delivery: Delivery | None = None,
) -> Checkpoint:
    """A Checkpoint from parts the caller has already checked; only its shape (which parts
    its status requires or forbids) is checked here (for the transitions). Its fields are
    set through their slots' own descriptors: what ``object.__setattr__`` ends in, without
    looking each one up by name."""
    checkpoint = _new_checkpoint(Checkpoint)
    _set_revision(checkpoint, revision)
    _set_status(checkpoint, status)
    _set_binding(checkpoint, binding)
    _set_created_at(checkpoint, created_at)
    _set_updated_at(checkpoint, updated_at)
    _set_execution(checkpoint, execution)
    _set_result(checkpoint, result)
    _set_delivery(checkpoint, delivery)
    required, forbidden = _SHAPES[status]
    mask = present_mask(execution, result, delivery)
    if mask & required != required or mask & forbidden:
        checkpoint.check_shape()  # raises, naming the first part out of place
    return checkpoint


_new_checkpoint = object.__new__
(
    _set_revision,
    _set_status,
    _set_binding,
    _set_created_at,
    _set_updated_at,
    _set_execution,
    _set_result,
    _set_delivery,
) = (
    Checkpoint.__dict__[name].__set__
    for name in (
        "revision",
        "status",
        "binding",
        "created_at",
        "updated_at",
        "execution",
        "result",
        "delivery",
    )
)
"""The setters of a Checkpoint's slots, in the order of its fields."""


def within_payload_limit(checkpoint: Checkpoint, limit: int) -> Checkpoint:
    """``checkpoint`` if its payload fits ``limit`` (already checked); a valid record's
    only rule that depends on the payload limit.

    Raises:
        CheckpointError: PAYLOAD_LIMIT_EXCEEDED, as validating its persisted form under
            ``limit`` would.
    """
    result = checkpoint.result
    if result is not None and result.payload_bytes > limit:
        raise CheckpointError(
            ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
            f"encodes to more than {limit} bytes",
            field="result.payload",
            limit=limit,
        )
    return checkpoint


def _changing(name: str) -> Any:
    """The dict method ``name`` of a StoredRecord: it marks the mapping changed first,
    so that it is validated again like any mapping."""
    change = getattr(dict, name)

    def mark_and_change(self: StoredRecord, *args: Any, **kwargs: Any) -> Any:
        self._changed = True
        return change(self, *args, **kwargs)

    mark_and_change.__name__ = name
    return mark_and_change


class StoredRecord(dict[str, Any]):
    """A record as a store read it: the JSON object exactly as stored, and in
    :attr:`checkpoint` the :class:`Checkpoint` it validated as (with the largest payload
    limit).

    The stores of this package return one from ``get``: it is the mapping the storage
    contract promises, a fresh one on every read, and the record is validated once, when
    it is read. :meth:`Checkpoint.from_dict` and the transitions take its
    :attr:`checkpoint` instead of validating the object again; only a smaller payload
    limit is checked. Only :func:`~tool_execution_checkpoint.stores.decode_stored` makes
    one.

    Once one of its members is set, deleted or updated, it is validated in full, as any
    mapping is (:attr:`checkpoint` stays the record that was read). Its nested objects
    are the record as stored: a mapping whose nested objects were changed must be copied
    first (``copy.deepcopy(record)``, like ``dict(record)`` and a pickle, is a plain
    dict), or it is still taken as the record that was read.
    """

    __slots__ = ("_changed", "checkpoint")

    checkpoint: Checkpoint
    _changed: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs
        raise TypeError("a StoredRecord is made by decode_stored only")

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Copy and pickle as a plain dict."""
        return (dict, (dict(self),))

    __setitem__ = _changing("__setitem__")
    __delitem__ = _changing("__delitem__")
    __ior__ = _changing("__ior__")
    clear = _changing("clear")
    pop = _changing("pop")
    popitem = _changing("popitem")
    setdefault = _changing("setdefault")
    update = _changing("update")


def stored_record(value: dict[str, Any], checkpoint: Checkpoint) -> StoredRecord:
    """The StoredRecord of ``value``, the JSON object that ``checkpoint`` was validated
    from (for :func:`~tool_execution_checkpoint.stores.decode_stored`; ``value`` is held
    by nobody else)."""
    record = dict.__new__(StoredRecord)
    dict.update(record, value)
    record.checkpoint, record._changed = checkpoint, False
    return record
