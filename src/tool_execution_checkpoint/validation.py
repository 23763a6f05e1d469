"""Checks of single values: identifiers, reasons, timestamps, limits and JSON payloads.

Each check takes the value, the dotted field name to report and the code to raise, and
returns the value in its stored form. Limits come from the transition table. Messages
name the field and the limit, never the value.
"""

from __future__ import annotations

import calendar
import json
import json.encoder
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from math import isfinite
from typing import Any, TypeAlias

from .errors import CheckpointError, ErrorCode
from .table import TABLE

__all__ = [
    "TIMESTAMP_PATTERN",
    "JSONValue",
    "check_flag",
    "check_identifier",
    "check_json_shape",
    "check_max_payload_bytes",
    "check_reason",
    "check_timestamp",
    "encode_payload",
    "timestamp_argument",
    "timestamp_microseconds",
]

JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"
"""A plain JSON value: what a result payload is. Functions that take a payload accept
``object`` and check it at run time, so that a ``dict[str, str]`` needs no cast."""

_LIMITS = TABLE.limits
_FORBIDDEN_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
TIMESTAMP_PATTERN = (
    r"((?!0000)[0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
)
"""The timestamp profile as a regular expression to match in full (no anchors). It checks
every field's range; only the day of the month is left to :func:`check_timestamp`."""
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False
)


def _one_shot_encoder() -> Callable[[object], str]:
    """``_ENCODER.encode``, with the C encoder it would build on every call built once.

    ``JSONEncoder.encode`` makes a new C encoder from its settings for each value (about a
    microsecond); this one is made from the same settings (no circular check, no indent,
    the same separators, string encoder and NaN refusal), so its text and its ValueErrors
    are the same. A value it cannot encode goes to ``_ENCODER.encode``, which refuses a
    real one the same way: after the walk only a stand-in for a plain value gets there,
    such as the symbolic values CrossHair's proofs pass, which its patch of
    ``JSONEncoder.encode`` encodes. Where ``json`` has no C encoder, ``_ENCODER.encode``
    itself."""
    make: Any = getattr(json.encoder, "c_make_encoder", None)  # untyped in typeshed
    if make is None:  # pragma: no cover (CPython always has the C encoder)
        return _ENCODER.encode
    encoder = make(
        None,  # no markers: check_circular is off (the walk bounds the depth)
        _ENCODER.default,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # no indent
        _ENCODER.key_separator,
        _ENCODER.item_separator,
        False,  # sort_keys
        False,  # skipkeys  # pragma: no mutate (the walk refuses a key that is no str)
        False,  # allow_nan
    )
    join = "".join

    def encode(value: object) -> str:
        try:
            chunks = encoder(value, 0)
        except TypeError:  # pragma: no mutate (the encoder's own path raises it again)
            chunks = None
        if chunks is None:  # not a plain value: a stand-in for one (CrossHair's symbolic
            return _ENCODER.encode(value)  # values, which its patch of encode takes)
        return join(chunks)

    return encode


_ENCODE = _one_shot_encoder()


def _checked_text(value: object, field: str, code: ErrorCode, limit: int, what: str) -> str:
    # pragma: no mutate start (a fast path: a mutant only sends more values below)
    if type(value) is str and 0 < len(value) <= limit and value.isascii() and value.isprintable():
        return value  # the common case, decided without the regular expression
    # pragma: no mutate end
    if type(value) is not str:
        raise CheckpointError(code, f"{what} must be a str", field=field)
    if not value or len(value) > limit:
        raise CheckpointError(
            code, f"{what} must have 1 to {limit} characters", field=field, limit=limit
        )
    if _FORBIDDEN_CHARACTERS.search(value):
        raise CheckpointError(
            code, f"{what} must not hold control characters or lone surrogates", field=field
        )
    return value


def check_identifier(value: object, field: str, code: ErrorCode) -> str:
    """Return ``value`` if it is a valid identifier: a str of 1 to 256 characters with no
    control characters (C0, DEL, C1) and no lone surrogates."""
    return _checked_text(value, field, code, _LIMITS.max_identifier_chars, "an identifier")


def check_reason(value: object, field: str, code: ErrorCode) -> str:
    """Return ``value`` if it is a valid uncertain reason: like an identifier, but up to
    1,024 characters."""
    return _checked_text(value, field, code, _LIMITS.max_reason_chars, "a reason")


def check_timestamp(value: object, field: str, code: ErrorCode) -> str:
    """Return ``value`` if it is an RFC 3339 timestamp in the profile spec/ describes."""
    if type(value) is not str:
        raise CheckpointError(code, "a timestamp must be a str", field=field)
    match = _TIMESTAMP.fullmatch(value)
    if match is None:
        raise CheckpointError(code, "a timestamp must be RFC 3339 with an offset", field=field)
    day = match.group(3)
    if day > "28":  # noqa: SIM102  # pragma: no mutate (a fast path: every month has 28 days)
        if int(day) > calendar.monthrange(int(match.group(1)), int(match.group(2)))[1]:
            raise CheckpointError(code, "a timestamp names a day its month lacks", field=field)
    return value


def timestamp_microseconds(value: str) -> int:
    """Microseconds since the Unix epoch of a timestamp that :func:`check_timestamp`
    accepted (fraction digits past the sixth are dropped). Stores index this number, since
    RFC 3339 text with different offsets does not sort by instant."""
    if _TIMESTAMP.fullmatch(value) is None:
        raise ValueError("not a checked timestamp")
    # Every text of the profile is one datetime.fromisoformat reads (Python 3.11 and
    # later), and it drops the fraction's digits past the sixth as the profile says.
    return (datetime.fromisoformat(value) - _EPOCH) // _MICROSECOND


def timestamp_argument(value: object, field: str) -> str:
    """Return a caller's timestamp argument in stored form.

    Accepts an RFC 3339 str or an aware :class:`datetime.datetime`; a naive datetime is
    refused because its instant is unknown.
    """
    if type(value) is str:  # pragma: no mutate (a fast path: the same check runs below)
        return check_timestamp(value, field, ErrorCode.INVALID_ARGUMENT)
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT, "a datetime must be timezone-aware", field=field
            )
        value = value.isoformat()
    return check_timestamp(value, field, ErrorCode.INVALID_ARGUMENT)


def check_flag(value: object, field: str) -> bool:
    """Return ``value`` if it is True or False (not merely truthy: a flag read from a
    URL's query as ``"false"`` must not switch a setting on)."""
    if type(value) is not bool:
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be True or False", field=field)
    return value


def check_max_payload_bytes(value: object) -> int:
    """Return ``value`` if it is an int in 1..10,485,760."""
    ceiling = _LIMITS.ceiling_max_payload_bytes
    if type(value) is not int or not 1 <= value <= ceiling:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            f"must be an int from 1 to {ceiling}",
            field="max_payload_bytes",
            limit=ceiling,
        )
    return value


_SCALARS = frozenset({str, int, bool, type(None)})
"""The scalar types a payload may hold that need no check of their value."""
_SCALARS_AND_FLOAT = _SCALARS | {float}
"""The same and float, for a walk that leaves NaN and the infinities to the encoder."""


def _walk(value: object, field: str, *, check_floats: bool = True) -> None:
    """Refuse anything but plain JSON types, and pass the depth or value-count limit.

    Counting happens per container before its items are visited, so a container that
    would pass the count limit is refused without being walked. With ``check_floats``
    false, NaN and the infinities are left to the encoder, which refuses them too. The
    walk goes one depth at a time, so deep payloads cost no Python recursion.
    """
    max_depth = _LIMITS.max_depth
    max_values = _LIMITS.max_values
    kind = type(value)
    if kind is not dict and kind is not list:
        if kind is float:
            if check_floats and not isfinite(value):  # type: ignore[arg-type]
                raise CheckpointError(
                    ErrorCode.PAYLOAD_NOT_JSON, "is NaN or an infinity", field=field
                )
        elif not (kind is str or kind is int or kind is bool or value is None):
            raise _not_json(kind, field)
        return
    leaves = _SCALARS if check_floats else _SCALARS_AND_FLOAT
    count = 1
    depth = 1
    level: list[Any] = [value]
    while level:  # one depth at a time: no Python recursion, no per-item bookkeeping
        if depth > max_depth:
            raise CheckpointError(
                ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
                f"nests deeper than {max_depth} containers",
                field=field,
                limit=max_depth,
            )
        nested: list[Any] = []
        push = nested.append
        for container in level:
            count += len(container)
            if count > max_values:
                raise CheckpointError(
                    ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
                    f"holds more than {max_values} values",
                    field=field,
                    limit=max_values,
                )
            if type(container) is dict:
                for key in container:
                    if type(key) is not str:
                        raise CheckpointError(
                            ErrorCode.PAYLOAD_NOT_JSON,
                            "has an object key that is not a str",
                            field=field,
                        )
                items = container.values()
            else:
                items = container
            for item in items:
                kind = type(item)
                if kind in leaves:  # one lookup for the common scalars
                    continue
                if kind is dict or kind is list:
                    push(item)
                elif kind is not float:
                    raise _not_json(kind, field)
                elif check_floats and not isfinite(item):
                    raise CheckpointError(
                        ErrorCode.PAYLOAD_NOT_JSON, "holds NaN or an infinity", field=field
                    )
        level = nested
        depth += 1


def _not_json(kind: type, field: str) -> CheckpointError:
    return CheckpointError(
        ErrorCode.PAYLOAD_NOT_JSON, f"holds a {kind.__name__}, which is not JSON", field=field
    )


def check_json_shape(value: object, field: str) -> None:
    """Refuse anything but plain JSON types, and pass the depth or value-count limit
    (PAYLOAD_NOT_JSON or PAYLOAD_LIMIT_EXCEEDED naming ``field``)."""
    _walk(value, field)


def encode_payload(value: object, max_payload_bytes: int, field: str) -> tuple[str, int]:
    """Check a result payload and return its compact JSON text and that text's UTF-8 size.

    The payload must be plain JSON within the depth and value-count limits, and its
    compact UTF-8 encoding (no spaces, non-ASCII not escaped) must be at most
    ``max_payload_bytes`` long: exactly the limit is accepted, one byte more is refused.

    When a payload breaks several rules, the error names the first fault the walk meets,
    going one depth at a time (a shallower fault before a deeper one), and NaN or an
    infinity only when nothing else is wrong.
    """
    # Not mutated: check_floats=None would act as False, an equivalent mutant.
    _walk(value, field, check_floats=False)  # pragma: no mutate
    # Every refusal below is raised outside its except block: the encoder's errors are
    # not kept as a context (a UnicodeEncodeError's ``object`` is the payload's text).
    text: str | None
    try:
        text = _ENCODE(value)
    except ValueError:
        text = None
    if text is None:
        # The encoder refuses NaN and the infinities; the walk names them. The only other
        # ValueError after the walk: an int past Python's int-to-str limit.
        _walk(value, field)
        raise CheckpointError(
            ErrorCode.PAYLOAD_LIMIT_EXCEEDED, "holds an integer with too many digits", field=field
        )
    size: int | None
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            size = None
    if size is None:
        raise CheckpointError(ErrorCode.PAYLOAD_NOT_JSON, "holds a lone surrogate", field=field)
    if size > max_payload_bytes:
        raise CheckpointError(
            ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
            f"encodes to more than {max_payload_bytes} bytes",
            field=field,
            limit=max_payload_bytes,
        )
    return text, size
