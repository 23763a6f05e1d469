"""fingerprint: canonical digests of a tool's input, for Binding.input_fingerprint.

Two digests, both ``sha256:<64 hex digits>``:

- :func:`fingerprint` of a plain JSON value (object keys sorted, no whitespace, UTF-8,
  non-ASCII not escaped, numbers as Python's json writes them, so ``1`` and ``1.0``
  differ). Any stable digest the application prefers works as well.
- :func:`arguments_fingerprint` of a guarded call's arguments, as Python values: each
  value is first written as its :func:`canonical` form, which keeps its type beside its
  value, so that inputs that would meet in JSON (a tuple and a list, ``"1"`` and a
  ``Decimal``, two models with the same fields, a masked secret and another) stay apart.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import hashlib
import json
import pathlib
import uuid
from collections.abc import Mapping
from typing import Any

from .errors import CheckpointError, ErrorCode
from .table import TABLE
from .validation import JSONValue, check_json_shape

__all__ = ["arguments_fingerprint", "canonical", "fingerprint"]


def fingerprint(value: object) -> str:
    """Return ``sha256:<64 hex digits>`` of ``value``'s canonical JSON.

    Raises:
        CheckpointError: PAYLOAD_NOT_JSON for anything but plain JSON (NaN, infinities,
            lone surrogates, non-str keys, tuples, sets, bytes, other objects);
            PAYLOAD_LIMIT_EXCEEDED past the payload limits on depth (32) and values
            (10,000).
    """
    check_json_shape(value, "value")
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    encoded: bytes | None
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:  # its ``object`` is the text: not kept as a context
        encoded = None
    if encoded is None:
        raise CheckpointError(ErrorCode.PAYLOAD_NOT_JSON, "holds a lone surrogate", field="value")
    return f"sha256:{hashlib.sha256(encoded).hexdigest()}"


def arguments_fingerprint(arguments: Mapping[str, object]) -> str:
    """Return ``sha256:<64 hex digits>`` of the :func:`canonical` form of ``arguments``.

    Equal inputs (the same types holding equal values) give equal digests; inputs that
    differ in any value, or in a type that may change the effect, give different ones.
    Secrets enter only as a digest of their value.

    Raises:
        CheckpointError: as :func:`canonical`.
    """
    return digest_of_canonical(canonical(dict(arguments)))


def digest_of_canonical(form: JSONValue) -> str:
    """The digest of a :func:`canonical` form (ASCII JSON, so any ``str`` encodes)."""
    text = json.dumps(form, separators=(",", ":"), ensure_ascii=True)
    return f"sha256:{hashlib.sha256(text.encode('ascii')).hexdigest()}"


def canonical(value: object) -> JSONValue:
    """``value`` as a JSON tree that keeps its type: ``[tag, ...]`` for every value.

    Encoded: None, bool, int, float (exactly, by ``float.hex``: NaN, infinities and -0.0
    kept), str, bytes, lists, tuples, dicts (any encodable keys), sets, enums, datetimes,
    dates, times, timedeltas, Decimals, UUIDs, paths, dataclasses (every field), pydantic
    models (every field, excluded or not, extra fields and private attributes) and
    secrets (anything with ``get_secret_value``: only a SHA-256 of the secret). A
    subclass of a container or a model keeps its class's qualified name.

    Raises:
        CheckpointError: PAYLOAD_NOT_JSON naming only the type of a value it cannot
            encode faithfully; PAYLOAD_LIMIT_EXCEEDED past a nesting depth of 32
            (a cycle among them).
    """
    return _encode(value, 0)


_MAX_DEPTH = TABLE.limits.max_depth


def _refuse(kind: type[Any]) -> CheckpointError:
    return CheckpointError(
        ErrorCode.PAYLOAD_NOT_JSON,
        f"holds a {kind.__name__}, which the fingerprint cannot encode faithfully: "
        "exclude the parameter or name the arguments that identify the call",
        field="arguments",
    )


def _kind(value: object, base: type[Any]) -> str:
    """The tag of a container: its base's name, with the class's name for a subclass."""
    kind = type(value)
    return base.__name__ if kind is base else f"{base.__name__}:{kind.__qualname__}"


def _sorted(items: list[JSONValue]) -> list[JSONValue]:
    return sorted(items, key=lambda item: json.dumps(item, separators=(",", ":")))


def _encode(value: object, depth: int) -> JSONValue:
    if depth > _MAX_DEPTH:
        raise CheckpointError(
            ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
            "nests deeper than the limit (or holds a cycle)",
            field="arguments",
            limit=_MAX_DEPTH,
        )
    inner = depth + 1
    if value is None:
        return ["none"]
    if isinstance(value, enum.Enum):  # before int and str: IntEnum and StrEnum are both
        return ["enum", type(value).__qualname__, _encode(value.value, inner)]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return [_kind(value, int), _decimal_text(value)]
    if isinstance(value, float):
        return [_kind(value, float), float.hex(value)]
    if isinstance(value, str):
        return [_kind(value, str), str(value)]
    if isinstance(value, bytes | bytearray | memoryview):
        return [type(value).__name__, bytes(value).hex()]
    if isinstance(value, list | tuple):
        sequence = list if isinstance(value, list) else tuple
        return [_kind(value, sequence), [_encode(item, inner) for item in value]]
    if isinstance(value, Mapping):
        pairs = [[_encode(key, inner), _encode(item, inner)] for key, item in value.items()]
        return [_kind(value, dict), _sorted(pairs)]  # type: ignore[arg-type]
    if isinstance(value, set | frozenset):
        base = set if isinstance(value, set) else frozenset
        return [_kind(value, base), _sorted([_encode(item, inner) for item in value])]
    return _encode_object(value, inner)


def _decimal_text(value: int) -> str:
    text: str | None
    try:
        text = str(int(value))
    except ValueError:  # past Python's int-to-str digit limit
        text = None
    if text is None:
        raise CheckpointError(
            ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
            "holds an integer too long to encode",
            field="arguments",
        )
    return text


def _encode_object(value: object, inner: int) -> JSONValue:
    secret = getattr(value, "get_secret_value", None)
    if callable(secret):
        return ["secret", type(value).__qualname__, _secret_digest(secret())]
    if isinstance(value, datetime.datetime):  # before date: a datetime is a date
        return ["datetime", value.isoformat(), value.fold]
    if isinstance(value, datetime.date):
        return ["date", value.isoformat()]
    if isinstance(value, datetime.time):
        return ["time", value.isoformat(), value.fold]
    if isinstance(value, datetime.timedelta):
        return ["timedelta", value.days, value.seconds, value.microseconds]
    if isinstance(value, decimal.Decimal):
        return ["decimal", str(value)]
    if isinstance(value, uuid.UUID):
        return ["uuid", str(value)]
    if isinstance(value, pathlib.PurePath):
        return [type(value).__name__, str(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
        return ["dataclass", type(value).__qualname__, _encode(fields, inner)]
    if hasattr(type(value), "__pydantic_fields__") and hasattr(value, "__dict__"):
        parts = {
            "fields": dict(vars(value)),
            "extra": getattr(value, "__pydantic_extra__", None) or {},
            "private": getattr(value, "__pydantic_private__", None) or {},
        }
        return ["model", type(value).__qualname__, _encode(parts, inner)]
    raise _refuse(type(value))


def _secret_digest(secret: object) -> str:
    """The SHA-256 of a secret's value (text or bytes); the value itself is never kept."""
    if isinstance(secret, str):
        data = secret.encode("utf-8", "surrogatepass")
    elif isinstance(secret, bytes | bytearray):
        data = bytes(secret)
    else:
        data = digest_of_canonical(_encode(secret, 0)).encode("ascii")
    return hashlib.sha256(data).hexdigest()
