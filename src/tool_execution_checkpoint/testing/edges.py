"""Values and keys at the edges, and comparing records exactly: what the store-contract
machine (:mod:`.contract`) and the conformance suite write, and how they compare what
they read back (by canonical JSON text: ``-0.0`` is not ``0.0``, ``1`` not ``1.0``,
``true`` not ``1``). Failure messages name record fields and the kind of difference,
never a value."""

from __future__ import annotations

import functools
import json
import math
import struct
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from hypothesis import strategies as st

from ..table import TABLE, Status

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "EDGE_FLOATS",
    "EDGE_INTS",
    "EDGE_STRINGS",
    "MAX_KEY_CHARS",
    "STAMPS",
    "STATUS_FILTERS",
    "canonical_json",
    "ceiling_payload",
    "difference",
    "edge_payloads",
    "expect_same",
    "identifiers",
    "json_values",
    "key_sets",
    "payloads",
    "prefix_sharing_keys",
]

DEFAULT_MAX_PAYLOAD_BYTES = TABLE.limits.default_max_payload_bytes
MAX_KEY_CHARS = TABLE.limits.max_identifier_chars

EDGE_FLOATS: tuple[float, ...] = (
    0.1 + 0.2,  # 0.30000000000000004: 17 significant digits
    1 / 3,
    2 / 3,
    math.pi,
    123456789.12345679,
    9007199254740993.0 - 1,  # 2**53 as a float
    1e16 + 2,
    5e-324,  # the smallest subnormal
    2.2250738585072014e-308,  # the smallest normal
    1.7976931348623157e308,  # the largest finite
    1e21,
    1e-7,
    -0.0,
    0.0,
    1.0,
    -1.5,
    16777217.0,  # 2**24 + 1: not representable in single precision
    0.1,
)
"""Floats a store must keep exactly: 17-digit values, subnormals, the extremes, ``-0.0``
and values single precision cannot hold."""

EDGE_INTS: tuple[int, ...] = (
    0,
    -1,
    2**31,
    -(2**31) - 1,
    2**53,
    2**53 + 1,
    -(2**53) - 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    2**64 + 1,
    10**30 + 1,
    -(10**100) - 7,
)
"""Integers a store must keep exactly: beyond a double's 2**53 and beyond 64 bits."""

EDGE_STRINGS: tuple[str, ...] = (
    "",
    "é",
    "€",
    "\uffff",
    "\U00010000",  # the first character outside the BMP
    "\U0001f600",  # an emoji: 4 bytes in UTF-8, a surrogate pair in UTF-16
    "\U0001f469\u200d\U0001f4bb",  # a joined emoji sequence
    "\U0010ffff",  # the last code point
    "\U0001d518\U0001d52b\U0001d526",  # mathematical letters outside the BMP
    "a\u0000b",  # NUL inside a string
    '"\\/\b\f\n\r\t',
    "\u2028\u2029",
    "\ud7ff\ue000",
)
"""Strings a store must keep exactly, characters outside the BMP above all (a column
that holds only 3-byte UTF-8 drops or mangles them)."""

STAMPS: tuple[str, ...] = (
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00.000001Z",
    "2026-03-01T12:00:00+02:00",
    "2026-06-01T00:00:00Z",
)
"""The times records are stamped with (their ``updatedAt``). A store on its writers'
host's clock lists them by these; a store with a clock of its own by when it wrote them."""

STATUS_FILTERS: tuple[frozenset[Status], ...] = tuple(
    frozenset(chosen) for size in range(len(Status) + 1) for chosen in combinations(Status, size)
)
"""Every subset of the statuses, the empty one included."""


# --- comparing exactly ------------------------------------------------------------------


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def canonical_json(value: object) -> str:
    """The JSON text of ``value`` with object members sorted: two values have the same
    text exactly when they are the same JSON value of the same Python types, so ``-0.0``
    differs from ``0.0``, ``1`` from ``1.0`` and ``True`` from ``1`` (``==`` hides all
    three). A value JSON cannot hold (NaN, a non-str member name) still gets a text, one
    no written record has."""
    try:
        return json.dumps(_plain(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return "\x00not JSON: " + type(value).__name__


def _kind(written: object, read: object) -> str:
    if type(written) is not type(read):
        return f"a {type(written).__name__} came back as a {type(read).__name__}"
    if isinstance(written, float) and isinstance(read, float):
        if written == read:
            return "a float came back with another sign (-0.0 and 0.0)"
        single = struct.unpack("f", struct.pack("f", written))[0] if abs(written) < 3e38 else None
        if single is not None and read == single:
            return "a float came back in single precision"
        return "a float came back with another value"
    if isinstance(written, int):
        return "an integer came back with another value (digits lost)"
    if isinstance(written, str) and isinstance(read, str):
        if any(ord(char) > 0xFFFF for char in written) and not any(
            ord(char) > 0xFFFF for char in read
        ):
            return "a string lost its characters outside the BMP"
        if written.startswith(read):
            return "a string came back truncated"
        return "a string came back changed"
    return "a value came back changed"


def difference(written: object, read: object, path: str = "record") -> str | None:
    """Where and how ``read`` differs from ``written``, or None when they are the same
    JSON value of the same types (see :func:`canonical_json`). The answer names record
    fields and the kind of difference, never a value: inside a payload it gives the
    path as ``payload`` plus array positions and ``{…}`` for object members."""
    if canonical_json(written) == canonical_json(read):
        return None
    inside = path.startswith("record.result.payload")
    if isinstance(written, Mapping) and isinstance(read, Mapping):
        if set(written) != set(read):
            return f"{path}: the object's members differ"
        for name in written:
            below = f"{path}{'.{…}' if inside else '.' + str(name)}"
            found = difference(written[name], read[name], below)
            if found is not None:
                return found
    if isinstance(written, list) and isinstance(read, list):
        if len(written) != len(read):
            return f"{path}: the array came back with {len(read)} items, not {len(written)}"
        for index, (left, right) in enumerate(zip(written, read, strict=True)):
            found = difference(left, right, f"{path}[{index}]")
            if found is not None:
                return found
    return f"{path}: {_kind(written, read)}"


def expect_same(written: Mapping[str, Any] | None, read: object, what: str) -> None:
    if written is None:
        if read is not None:
            raise AssertionError(f"{what}: the store holds a record where the model holds none")
        return
    if read is None:
        raise AssertionError(f"{what}: the store lost the record (it reads back as none)")
    found = difference(written, read)
    if found is not None:
        raise AssertionError(f"{what}: the record read back differs from the one written: {found}")


# --- values and keys at the edges ---------------------------------------------------------


def edge_payloads() -> list[object]:
    """Every edge value alone as a payload, then all of them in one nested payload (with
    member names outside the BMP)."""
    scalars: list[object] = [*EDGE_FLOATS, *EDGE_INTS, *EDGE_STRINGS, True, False, None]
    nested = {
        "floats": list(EDGE_FLOATS),
        "ints": list(EDGE_INTS),
        "strings": list(EDGE_STRINGS),
        "\U0001f600": {"\U0010ffff": [[-0.0, 2**63], {"": 0.1 + 0.2}]},
        "mixed": [1, 1.0, True, 0, -0.0, 0.0, False, None, "1"],
    }
    return [*scalars, nested, [nested, nested]]


_WIDTHS = {1: "a", 2: "é", 3: "€", 4: "\U0001f600"}


def ceiling_payload(size: int, width: int = 4) -> dict[str, str]:
    """A payload whose compact UTF-8 JSON encoding (the size the payload limit counts)
    is exactly ``size`` bytes (at least 12): one string of ``width``-byte characters
    (1 to 4; 4 is outside the BMP), padded with ASCII to the byte."""
    overhead = len('{"s":""}')
    room = size - overhead
    if room < 4 or width not in _WIDTHS:
        raise ValueError("a ceiling payload needs a size of at least 12 and a width of 1 to 4")
    count = room // width
    return {"s": _WIDTHS[width] * count + "a" * (room - count * width)}


def prefix_sharing_keys(
    lengths: Sequence[int] = (8, 32, 63, 64, 65, 128, 200, 254, 255),
) -> list[list[str]]:
    """Groups of valid keys, each group sharing a prefix of one of ``lengths`` characters
    and differing after it, the longest 256 characters long: a store that keeps only a
    prefix of the key makes two keys of a group share a record."""
    groups = []
    for length in lengths:
        if not 1 <= length < MAX_KEY_CHARS:
            raise ValueError(f"a shared prefix must have 1 to {MAX_KEY_CHARS - 1} characters")
        prefix = ("tec-key-" * (length // 8 + 1))[:length]
        groups.append([prefix + "a", prefix + "b", prefix + "\U0001f600", prefix + "\uffff"])
        if length <= MAX_KEY_CHARS - 2:
            groups[-1].append(prefix + "a" + "z")
    return groups


_ID_CHARS = st.sampled_from(
    [
        "a",
        "Z",
        "0",
        "-",
        ":",
        "/",
        " ",
        "é",
        "€",
        "\uffff",
        "\U00010000",
        "\U0001f600",
        "\U0010ffff",
    ]
)
identifiers = st.text(_ID_CHARS, min_size=1, max_size=12)
"""Identifiers (call ids, attempt ids, delivery ids) with characters outside the BMP."""


@functools.cache
def json_values(max_leaves: int = 12) -> st.SearchStrategy[object]:
    """JSON values built from the edge scalars and arbitrary ones: every float
    Hypothesis finds (``-0.0`` and subnormals included, NaN and infinities excluded),
    integers of up to 130 bits, strings of any characters JSON text can hold."""
    scalars = st.one_of(
        st.sampled_from(EDGE_FLOATS),
        st.sampled_from(EDGE_INTS),
        st.sampled_from(EDGE_STRINGS),
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(min_value=-(2**130), max_value=2**130),
        st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
        st.booleans(),
        st.none(),
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(_ID_CHARS, max_size=4), inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


@functools.cache
def payloads(ceiling: int) -> st.SearchStrategy[object]:
    """Payloads for completions: JSON values at the edges, and now and then one whose
    encoding is the payload ceiling to the byte or a few bytes under it."""
    near = st.builds(
        ceiling_payload,
        st.integers(min_value=max(12, ceiling - 3), max_value=ceiling),
        st.sampled_from(sorted(_WIDTHS)),
    )
    edges = st.sampled_from(edge_payloads())
    if ceiling < 12:
        return st.one_of(json_values(), edges)
    return st.one_of(json_values(), edges, near)


@st.composite
def key_sets(draw: st.DrawFn) -> list[str]:
    """Two to five distinct valid keys, sharing a prefix of 0 to 255 characters."""
    length = draw(
        st.sampled_from([0, 1, 16, 63, 64, 128, 200, 250, 254, 255, 255, 255])
        | st.integers(min_value=0, max_value=MAX_KEY_CHARS - 1)
    )
    prefix = draw(st.text(_ID_CHARS, min_size=length, max_size=length))
    room = MAX_KEY_CHARS - length
    tails = draw(
        st.lists(
            st.text(_ID_CHARS, min_size=0 if prefix else 1, max_size=min(room, 4)),
            min_size=2,
            max_size=5,
            unique=True,
        )
    )
    return [prefix + tail for tail in tails]
