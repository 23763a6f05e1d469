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
    """Why a :class:`CheckpointError` was raised.

    What each code means and what to do about it is part of the protocol: it is written
    in spec/transitions.toml (``[errors]``) and rendered into docs/troubleshooting.md.
    The table's loader checks that it documents exactly these codes.
    """

    BINDING_CONFLICT = "BINDING_CONFLICT"
    FENCE_CONFLICT = "FENCE_CONFLICT"
    INVALID_TRANSITION = "INVALID_TRANSITION"
    INVALID_CHECKPOINT = "INVALID_CHECKPOINT"
    UNSUPPORTED_SCHEMA = "UNSUPPORTED_SCHEMA"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    PAYLOAD_NOT_JSON = "PAYLOAD_NOT_JSON"
    PAYLOAD_LIMIT_EXCEEDED = "PAYLOAD_LIMIT_EXCEEDED"


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
