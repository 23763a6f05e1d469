"""Immutable checkpoint records and their persisted JSON form (schema version 1).

Every record type checks itself when it is built, so an instance is valid by construction
and a record read from storage is validated exactly once, by :meth:`Checkpoint.from_dict`.
The persisted form uses language-neutral camelCase names; spec/record.schema.json
describes it.

A result payload is kept as its compact JSON text, which makes a record deeply immutable
and keeps the payload exactly as it was completed; :attr:`Result.payload` decodes a fresh
copy on each access.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, ClassVar, Self

from .errors import CheckpointError, ErrorCode
from .table import TABLE, Status
from .validation import (
    JSONValue,
    check_identifier,
    check_max_payload_bytes,
    check_reason,
    check_timestamp,
    encode_payload,
)

__all__ = [
    "Binding",
    "Checkpoint",
    "Delivery",
    "Execution",
    "Result",
    "StoredRecord",
    "Uncertainty",
]

_ARGUMENT = ErrorCode.INVALID_ARGUMENT
_INVALID = ErrorCode.INVALID_CHECKPOINT
_DEFAULT_MAX_PAYLOAD_BYTES = TABLE.limits.default_max_payload_bytes
_NOT_JSON: Any = object()

_PART_BITS: Mapping[str, int] = {
    "execution": 1,
    "execution.uncertain": 2,
    "result": 4,
    "result.prunedAt": 8,
    "delivery": 16,
    "delivery.deliveredAt": 32,
}
"""A bit for each nullable part, so that a record's shape is checked with two masks."""


def mask_of_parts(parts: frozenset[str]) -> int:
    """The bits of the nullable ``parts`` (persisted naming)."""
    return sum(_PART_BITS[part] for part in parts)


_EXECUTION, _UNCERTAIN, _RESULT, _PRUNED, _DELIVERY, _DELIVERED = _PART_BITS.values()


def present_mask(
    execution: Execution | None, result: Result | None, delivery: Delivery | None
) -> int:
    """The bits of the nullable parts that a record with these parts holds."""
    mask = 0
    if execution is not None:
        mask = _EXECUTION  # pragma: no mutate (mask is 0 here: = and |= are the same)
        if execution.uncertain is not None:
            mask |= _UNCERTAIN
    if result is not None:
        mask |= _RESULT
        if result.pruned_at is not None:
            mask |= _PRUNED
    if delivery is not None:
        mask |= _DELIVERY
        if delivery.delivered_at is not None:
            mask |= _DELIVERED
    return mask


def first_part(mask: int) -> str:
    """The name of the first nullable part, in sorted order, whose bit ``mask`` holds."""
    return min(part for part, bit in _PART_BITS.items() if mask & bit)


_SHAPES: Mapping[Status, tuple[int, int]] = {
    status: (mask_of_parts(rule.required), mask_of_parts(rule.forbidden))
    for status, rule in TABLE.statuses.items()
}
"""Each status's required and forbidden parts, as masks."""


def _check_keys(raw: Mapping[Any, Any], expected: frozenset[str], path: str | None) -> None:
    """Raise INVALID_CHECKPOINT naming the first missing field, or the part holding a
    field that schema version 1 does not have (the unknown key itself is not echoed)."""
    keys = raw.keys()
    if keys == expected:
        return
    missing = sorted(expected - keys)
    if missing:
        where = f"{path}.{missing[0]}" if path else missing[0]
        raise CheckpointError(_INVALID, "is missing", field=where)
    raise CheckpointError(_INVALID, "holds a field that schema version 1 does not have", field=path)


class _Part:
    """A nested part of a record: knows its persisted names and how to read them."""

    __slots__ = ()

    JSON_NAMES: ClassVar[Mapping[str, str]]
    """Python attribute name -> persisted camelCase name."""

    @classmethod
    def _from_json(cls, raw: object, path: str) -> Self:
        """Build the part from its persisted mapping, reporting INVALID_CHECKPOINT."""
        if not isinstance(raw, Mapping):
            raise CheckpointError(_INVALID, "must be an object", field=path)
        _check_keys(raw, frozenset(cls.JSON_NAMES.values()), path)
        try:
            return cls(**{name: raw[json_name] for name, json_name in cls.JSON_NAMES.items()})
        except CheckpointError as error:
            if error.code is not _ARGUMENT:
                raise
            refusal = error
        # Raised outside the except block, so that no context is kept.
        # Every error a part's constructor raises names one of the part's own
        # fields, so the fallback is never taken (not mutated: equivalent there).
        json_name = cls.JSON_NAMES.get(refusal.field or "", refusal.field)  # pragma: no mutate
        raise CheckpointError(
            _INVALID, refusal.detail, field=f"{path}.{json_name}", limit=refusal.limit
        )

    def _to_json(self) -> dict[str, Any]:
        return {json_name: getattr(self, name) for name, json_name in self.JSON_NAMES.items()}


_quote: Callable[[str], str] = encode_basestring
"""A str as a JSON string, non-ASCII kept: what ``json.dumps(ensure_ascii=False)`` writes."""


def _json_text(value: str | Uncertainty | Execution | Delivery | None) -> str:
    """An optional field as compact JSON text: what ``json.dumps(ensure_ascii=False)``
    writes for the field's persisted form (each part writes its own)."""
    if value is None:
        return "null"
    if isinstance(value, str):  # a checked field is a str itself, never a subclass
        return _quote(value)
    return value._json_text()


@dataclass(frozen=True, slots=True)
class Binding(_Part):
    """What a checkpoint is for. All five fields are identifiers and all are required.

    A stored record answers only for the binding it was created with: a difference in any
    field is BINDING_CONFLICT, never a cache hit. ``input_fingerprint`` is a digest of the
    tool's input chosen by the application (for example ``fingerprint(arguments)``).
    """

    namespace: str
    call_id: str
    tool_name: str
    tool_revision: str
    input_fingerprint: str

    JSON_NAMES: ClassVar[Mapping[str, str]] = {
        "namespace": "namespace",
        "call_id": "callId",
        "tool_name": "toolName",
        "tool_revision": "toolRevision",
        "input_fingerprint": "inputFingerprint",
    }

    def __post_init__(self) -> None:
        for name in self.JSON_NAMES:
            check_identifier(getattr(self, name), name, _ARGUMENT)

    def __repr__(self) -> str:
        """The tool's name, revision and fingerprint; of the namespace and the call id,
        which an application may make of user data, only their lengths."""
        return (
            f"Binding(namespace=<{len(self.namespace)} chars>, "
            f"call_id=<{len(self.call_id)} chars>, tool_name={self.tool_name!r}, "
            f"tool_revision={self.tool_revision!r}, "
            f"input_fingerprint={self.input_fingerprint!r})"
        )

    def _json_text(self) -> str:
        return (
            f'{{"namespace":{_quote(self.namespace)},"callId":{_quote(self.call_id)},'
            f'"toolName":{_quote(self.tool_name)},"toolRevision":{_quote(self.tool_revision)},'
            f'"inputFingerprint":{_quote(self.input_fingerprint)}}}'
        )

    def differing_fields(self, other: Binding) -> tuple[str, ...]:
        """Return the names of the fields in which ``other`` differs from this binding."""
        return tuple(
            name for name in self.JSON_NAMES if getattr(self, name) != getattr(other, name)
        )


@dataclass(frozen=True, slots=True)
class Uncertainty(_Part):
    """Why the owning attempt could not tell whether the tool's effect happened, and when."""

    reason: str
    at: str

    JSON_NAMES: ClassVar[Mapping[str, str]] = {"reason": "reason", "at": "at"}

    def __post_init__(self) -> None:
        check_reason(self.reason, "reason", _ARGUMENT)
        check_timestamp(self.at, "at", _ARGUMENT)

    def _json_text(self) -> str:
        return f'{{"reason":{_quote(self.reason)},"at":{_quote(self.at)}}}'


@dataclass(frozen=True, slots=True)
class Execution(_Part):
    """The claim on the tool's one execution: the owning attempt id and when it claimed."""

    attempt_id: str
    claimed_at: str
    uncertain: Uncertainty | None = None

    JSON_NAMES: ClassVar[Mapping[str, str]] = {
        "attempt_id": "attemptId",
        "claimed_at": "claimedAt",
        "uncertain": "uncertain",
    }

    def __post_init__(self) -> None:
        check_identifier(self.attempt_id, "attempt_id", _ARGUMENT)
        check_timestamp(self.claimed_at, "claimed_at", _ARGUMENT)
        if self.uncertain is not None and type(self.uncertain) is not Uncertainty:
            raise CheckpointError(_ARGUMENT, "must be an Uncertainty or None", field="uncertain")

    @classmethod
    def _from_json(cls, raw: object, path: str) -> Self:
        if isinstance(raw, Mapping) and isinstance(raw.get("uncertain"), Mapping):
            uncertain = Uncertainty._from_json(raw["uncertain"], f"{path}.uncertain")
            raw = {**raw, "uncertain": uncertain}
        return super(Execution, cls)._from_json(raw, path)

    def _to_json(self) -> dict[str, Any]:
        uncertain = self.uncertain._to_json() if self.uncertain is not None else None
        return {"attemptId": self.attempt_id, "claimedAt": self.claimed_at, "uncertain": uncertain}

    def _json_text(self) -> str:
        return (
            f'{{"attemptId":{_quote(self.attempt_id)},"claimedAt":{_quote(self.claimed_at)},'
            f'"uncertain":{_json_text(self.uncertain)}}}'
        )


@dataclass(frozen=True, slots=True)
class Delivery(_Part):
    """The claim on delivering the stored result: the owning delivery id, when it claimed,
    and when the delivery was confirmed (``None`` until then)."""

    delivery_id: str
    claimed_at: str
    delivered_at: str | None = None

    JSON_NAMES: ClassVar[Mapping[str, str]] = {
        "delivery_id": "deliveryId",
        "claimed_at": "claimedAt",
        "delivered_at": "deliveredAt",
    }

    def __post_init__(self) -> None:
        check_identifier(self.delivery_id, "delivery_id", _ARGUMENT)
        check_timestamp(self.claimed_at, "claimed_at", _ARGUMENT)
        if self.delivered_at is not None:
            check_timestamp(self.delivered_at, "delivered_at", _ARGUMENT)

    def _json_text(self) -> str:
        return (
            f'{{"deliveryId":{_quote(self.delivery_id)},"claimedAt":{_quote(self.claimed_at)},'
            f'"deliveredAt":{_json_text(self.delivered_at)}}}'
        )


class Result:
    """The exact JSON payload to deliver, when it was completed, and, for a delivered
    record whose payload was pruned after its retention window, when it was pruned.

    The payload is checked once, when the Result is built, and kept as its compact JSON
    text (:attr:`payload_json`, :attr:`payload_bytes` bytes of UTF-8). :attr:`payload`
    decodes a fresh copy, so no caller can change a stored payload. A pruned result holds
    the payload ``null`` and a ``pruned_at`` timestamp. The repr shows the size, never the
    content.
    """

    __slots__ = ("completed_at", "payload_bytes", "payload_json", "pruned_at")

    payload_json: str
    payload_bytes: int
    completed_at: str
    pruned_at: str | None

    def __init__(
        self,
        payload: object,
        *,
        completed_at: str,
        max_payload_bytes: int = _DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        """Check ``payload`` against the limits and keep it.

        Raises:
            CheckpointError: PAYLOAD_NOT_JSON, PAYLOAD_LIMIT_EXCEEDED or INVALID_ARGUMENT.
        """
        limit = check_max_payload_bytes(max_payload_bytes)
        text, size = encode_payload(payload, limit, "payload")
        check_timestamp(completed_at, "completed_at", _ARGUMENT)
        self._set(text, size, completed_at, None)

    def _set(
        self, payload_json: str, payload_bytes: int, completed_at: str, pruned_at: str | None
    ) -> None:
        object.__setattr__(self, "payload_json", payload_json)
        object.__setattr__(self, "payload_bytes", payload_bytes)
        object.__setattr__(self, "completed_at", completed_at)
        object.__setattr__(self, "pruned_at", pruned_at)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Result is immutable; cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Result is immutable; cannot delete {name}")

    def __reduce__(self) -> tuple[Any, tuple[str, int, str, str | None]]:
        """Copy and pickle through the trusted constructor: the state was checked once."""
        state = (self.payload_json, self.payload_bytes, self.completed_at, self.pruned_at)
        return (_stored_result, state)

    def pruned(self, at: str) -> Result:
        """This result with its payload dropped at ``at`` (already checked)."""
        return _stored_result("null", 4, self.completed_at, at)

    @property
    def payload(self) -> JSONValue:
        """A fresh copy of the stored payload (``None`` once pruned)."""
        value: JSONValue = json.loads(self.payload_json)
        return value

    def _key(self) -> tuple[str, str, str | None]:
        return (self.payload_json, self.completed_at, self.pruned_at)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        pruned = f", pruned_at={self.pruned_at!r}" if self.pruned_at is not None else ""
        return (
            f"Result(<{self.payload_bytes} bytes of JSON>,"
            f" completed_at={self.completed_at!r}{pruned})"
        )

    @classmethod
    def _from_json(cls, raw: object, path: str, max_payload_bytes: int) -> Result:
        if not isinstance(raw, Mapping):
            raise CheckpointError(_INVALID, "must be an object", field=path)
        _check_keys(raw, _RESULT_KEYS, path)
        text, size = encode_payload(raw["payload"], max_payload_bytes, f"{path}.payload")
        completed_at = check_timestamp(raw["completedAt"], f"{path}.completedAt", _INVALID)
        pruned_at = raw["prunedAt"]
        if pruned_at is not None:
            check_timestamp(pruned_at, f"{path}.prunedAt", _INVALID)
            if text != "null":
                raise CheckpointError(
                    _INVALID, "is set, but the payload is not null", field=f"{path}.prunedAt"
                )
        return _stored_result(text, size, completed_at, pruned_at)

    def _to_json(self) -> dict[str, Any]:
        return {
            "payload": self.payload,
            "completedAt": self.completed_at,
            "prunedAt": self.pruned_at,
        }


def _stored_result(
    payload_json: str, payload_bytes: int, completed_at: str, pruned_at: str | None = None
) -> Result:
    result = object.__new__(Result)
    result._set(payload_json, payload_bytes, completed_at, pruned_at)
    return result


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
    its status requires or forbids) is checked here (for the transitions)."""
    checkpoint = object.__new__(Checkpoint)
    put = object.__setattr__
    put(checkpoint, "revision", revision)
    put(checkpoint, "status", status)
    put(checkpoint, "binding", binding)
    put(checkpoint, "created_at", created_at)
    put(checkpoint, "updated_at", updated_at)
    put(checkpoint, "execution", execution)
    put(checkpoint, "result", result)
    put(checkpoint, "delivery", delivery)
    checkpoint.check_shape()
    return checkpoint


def checked_execution(
    attempt_id: str, claimed_at: str, uncertain: Uncertainty | None = None
) -> Execution:
    """An Execution from values the caller has already checked (for the transitions)."""
    execution = object.__new__(Execution)
    object.__setattr__(execution, "attempt_id", attempt_id)
    object.__setattr__(execution, "claimed_at", claimed_at)
    object.__setattr__(execution, "uncertain", uncertain)
    return execution


def checked_uncertainty(reason: str, at: str) -> Uncertainty:
    """An Uncertainty from values the caller has already checked (for the transitions)."""
    uncertainty = object.__new__(Uncertainty)
    object.__setattr__(uncertainty, "reason", reason)
    object.__setattr__(uncertainty, "at", at)
    return uncertainty


def checked_delivery(
    delivery_id: str, claimed_at: str, delivered_at: str | None = None
) -> Delivery:
    """A Delivery from values the caller has already checked (for the transitions)."""
    delivery = object.__new__(Delivery)
    object.__setattr__(delivery, "delivery_id", delivery_id)
    object.__setattr__(delivery, "claimed_at", claimed_at)
    object.__setattr__(delivery, "delivered_at", delivered_at)
    return delivery


def checked_result(payload: object, completed_at: str, max_payload_bytes: int) -> Result:
    """A Result for ``payload``, which is checked here, completed at ``completed_at`` and
    under ``max_payload_bytes``, which the caller has already checked."""
    text, size = encode_payload(payload, max_payload_bytes, "payload")
    return _stored_result(text, size, completed_at)


_RESULT_KEYS = frozenset({"payload", "completedAt", "prunedAt"})
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
    the status requires (see the status table in spec/README.md).

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
