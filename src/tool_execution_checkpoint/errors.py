"""The one exception the library raises for bad input, and its documented codes.

Every refusal of a caller's input, whether a bad argument, a broken stored record or a
transition the protocol forbids, is a :class:`CheckpointError` whose :attr:`~CheckpointError.code`
is an :class:`ErrorCode`. Messages name the field and the limit involved and never echo the
offending value: payloads and identifiers may hold secrets.
"""

from __future__ import annotations

import enum

__all__ = ["CheckpointError", "ErrorCode"]


class ErrorCode(enum.StrEnum):
    """Why a :class:`CheckpointError` was raised. The README's troubleshooting section says,
    for each code, what it means and what to do."""

    BINDING_CONFLICT = "BINDING_CONFLICT"
    """The stored record belongs to a different binding: some field of namespace, call id,
    tool name, tool revision or input fingerprint differs."""

    FENCE_CONFLICT = "FENCE_CONFLICT"
    """The attempt id or delivery id does not own the claim the transition would finish."""

    INVALID_TRANSITION = "INVALID_TRANSITION"
    """The transition does not leave from the record's current status."""

    INVALID_CHECKPOINT = "INVALID_CHECKPOINT"
    """A stored record is structurally broken: a missing or unknown field, a wrong type, a
    status whose required parts are missing, a bad timestamp or identifier."""

    UNSUPPORTED_SCHEMA = "UNSUPPORTED_SCHEMA"
    """The record's schemaVersion is an integer other than the one this library implements."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    """An argument passed by the caller is malformed: an identifier, a timestamp, a reason,
    a binding or max_payload_bytes outside 1..10,485,760."""

    PAYLOAD_NOT_JSON = "PAYLOAD_NOT_JSON"
    """A result payload holds something that is not plain JSON: NaN or an infinity, a lone
    surrogate, a non-str key, a tuple, set, bytes or another object."""

    PAYLOAD_LIMIT_EXCEEDED = "PAYLOAD_LIMIT_EXCEEDED"
    """A result payload is over a limit: its encoded size, its nesting depth or its number
    of values."""


class CheckpointError(ValueError):
    """A refusal of the caller's input or of a stored record, with a documented code.

    Attributes:
        code: Why it was raised.
        detail: What was wrong, without the code and the field.
        field: The dotted path of the offending field or argument (for example
            ``"binding.callId"`` or ``"attempt_id"``), or ``None`` when it is the whole record.
        limit: The numeric limit that was passed, when a limit was passed.
    """

    code: ErrorCode
    detail: str
    field: str | None
    limit: int | None

    def __init__(
        self,
        code: ErrorCode,
        detail: str,
        *,
        field: str | None = None,
        limit: int | None = None,
    ) -> None:
        self.code = code
        self.detail = detail
        self.field = field
        self.limit = limit
        where = f"{field}: " if field else ""
        super().__init__(f"{code.value}: {where}{detail}")
