"""The parts of a record (its binding, the claim on its execution, the stored result,
the claim on its delivery) and their persisted JSON form (see
:mod:`tool_execution_checkpoint.records`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, ClassVar, Self

from ..errors import CheckpointError, ErrorCode
from ..table import TABLE
from ..validation import (
    JSONValue,
    check_identifier,
    check_max_payload_bytes,
    check_reason,
    check_timestamp,
    encode_payload,
)

__all__ = ["Binding", "Delivery", "Execution", "Result", "Uncertainty"]

_ARGUMENT = ErrorCode.INVALID_ARGUMENT
_INVALID = ErrorCode.INVALID_CHECKPOINT
_DEFAULT_MAX_PAYLOAD_BYTES = TABLE.limits.default_max_payload_bytes

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
    result = _new(Result)
    _set_payload_json(result, payload_json)
    _set_payload_bytes(result, payload_bytes)
    _set_completed_at(result, completed_at)
    _set_pruned_at(result, pruned_at)
    return result


_new = object.__new__
_set_payload_json, _set_payload_bytes, _set_completed_at, _set_pruned_at = (
    Result.__dict__[name].__set__
    for name in ("payload_json", "payload_bytes", "completed_at", "pruned_at")
)
"""The setters of a Result's slots: what ``object.__setattr__`` ends in, without looking
each one up by name (the parts below are built the same way)."""


_RESULT_KEYS = frozenset({"payload", "completedAt", "prunedAt"})


def checked_execution(
    attempt_id: str, claimed_at: str, uncertain: Uncertainty | None = None
) -> Execution:
    """An Execution from values the caller has already checked (for the transitions)."""
    execution = _new(Execution)
    _set_attempt_id(execution, attempt_id)
    _set_execution_claimed_at(execution, claimed_at)
    _set_uncertain(execution, uncertain)
    return execution


_set_attempt_id, _set_execution_claimed_at, _set_uncertain = (
    Execution.__dict__[name].__set__ for name in ("attempt_id", "claimed_at", "uncertain")
)


def checked_uncertainty(reason: str, at: str) -> Uncertainty:
    """An Uncertainty from values the caller has already checked (for the transitions)."""
    uncertainty = _new(Uncertainty)
    _set_reason(uncertainty, reason)
    _set_uncertain_at(uncertainty, at)
    return uncertainty


_set_reason, _set_uncertain_at = (Uncertainty.__dict__[name].__set__ for name in ("reason", "at"))


def checked_delivery(
    delivery_id: str, claimed_at: str, delivered_at: str | None = None
) -> Delivery:
    """A Delivery from values the caller has already checked (for the transitions)."""
    delivery = _new(Delivery)
    _set_delivery_id(delivery, delivery_id)
    _set_delivery_claimed_at(delivery, claimed_at)
    _set_delivered_at(delivery, delivered_at)
    return delivery


_set_delivery_id, _set_delivery_claimed_at, _set_delivered_at = (
    Delivery.__dict__[name].__set__ for name in ("delivery_id", "claimed_at", "delivered_at")
)


def checked_result(payload: object, completed_at: str, max_payload_bytes: int) -> Result:
    """A Result for ``payload``, which is checked here, completed at ``completed_at`` and
    under ``max_payload_bytes``, which the caller has already checked."""
    text, size = encode_payload(payload, max_payload_bytes, "payload")
    return _stored_result(text, size, completed_at)
