"""Payload and argument validation, exact at every boundary the transition table sets.

The limits are read from ``TABLE.limits`` (one test pins the documented numbers). Payload
size is the length of the compact UTF-8 JSON encoding; depth and value counts follow the
definitions in spec/transitions.toml. Reference predicates below restate those
definitions independently of the library's code.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from functools import partial
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import bindings, identifiers, json_values, timestamps
from tool_execution_checkpoint import (
    TABLE,
    Binding,
    Checkpoint,
    CheckpointError,
    Delivery,
    ErrorCode,
    Execution,
    JSONValue,
    Result,
    Uncertainty,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    mark_execution_uncertain,
    release_delivery,
    validate_checkpoint,
    validation,
)
from tool_execution_checkpoint.validation import (
    check_identifier,
    check_json_shape,
    check_reason,
    check_timestamp,
    encode_payload,
    timestamp_microseconds,
)

LIMITS = TABLE.limits
DEFAULT = LIMITS.default_max_payload_bytes
CEILING = LIMITS.ceiling_max_payload_bytes
T0 = "2026-12-02T12:00:00Z"
BINDING = Binding("ns", "call-1", "tool", "rev-1", "fp-1")
ATTEMPT = "attempt-1"
DELIVERY = "delivery-1"
SECRET = "SECRET-7f3a9c1e-do-not-echo"

NOT_JSON = ErrorCode.PAYLOAD_NOT_JSON
OVER_LIMIT = ErrorCode.PAYLOAD_LIMIT_EXCEEDED
BAD_ARGUMENT = ErrorCode.INVALID_ARGUMENT


# --- helpers ----------------------------------------------------------------------------


def refused(code: ErrorCode, call: Callable[[], object]) -> CheckpointError:
    """Run ``call``, require a CheckpointError with ``code``, and return it."""
    with pytest.raises(CheckpointError) as caught:
        call()
    assert caught.value.code is code, caught.value
    return caught.value


def encoded_size(value: object) -> int:
    """The spec's payload size: bytes of the compact UTF-8 JSON encoding."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8"))


def string_of_size(total: int, char: str = "a") -> str:
    """A str whose compact JSON encoding (quotes included) is exactly ``total`` bytes,
    made mostly of ``char`` and padded with ASCII."""
    body = total - 2
    width = encoded_size(char) - 2
    count = body // width
    text = char * count + "a" * (body - count * width)
    assert encoded_size(text) == total
    return text


def nested(levels: int, kind: str, inner: JSONValue) -> JSONValue:
    """``levels`` nested containers (lists, dicts or alternating) around ``inner``;
    ``inner`` None means the innermost container is empty."""
    value: JSONValue = None
    for level in range(levels):
        use_list = kind == "list" or (kind == "mixed" and level % 2 == 0)
        if level == 0:
            if use_list:
                value = [] if inner is None else [inner]
            else:
                value = {} if inner is None else {"k": inner}
        else:
            value = [value] if use_list else {"k": value}
    return value


def is_plain_json(value: object) -> bool:
    """The spec's plain JSON: exactly dict with str keys, list, str, int, finite float,
    bool, None; no lone surrogates."""
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return True
    if kind is float:
        return math.isfinite(cast(float, value))
    if kind is str:
        return not any(0xD800 <= ord(char) <= 0xDFFF for char in cast(str, value))
    if kind is list:
        return all(is_plain_json(item) for item in cast(list[object], value))
    if kind is dict:
        return all(
            type(key) is str and is_plain_json(key) and is_plain_json(item)
            for key, item in cast(dict[object, object], value).items()
        )
    return False


def depth_of(value: object) -> int:
    """A scalar is depth 0, [] and {} are depth 1, [[1]] is depth 2."""
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    return 0


def values_in(value: object) -> int:
    """Every value counts once, containers included; object keys do not count."""
    if isinstance(value, list):
        return 1 + sum(values_in(item) for item in value)
    if isinstance(value, dict):
        return 1 + sum(values_in(item) for item in value.values())
    return 1


def same_json(left: object, right: object) -> bool:
    """Equality that tells bool from int and float from int, and keeps -0.0."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        assert isinstance(right, list)
        return len(left) == len(right) and all(map(same_json, left, right))
    if isinstance(left, dict):
        assert isinstance(right, dict)
        return left.keys() == right.keys() and all(same_json(left[k], right[k]) for k in left)
    if isinstance(left, float):
        assert isinstance(right, float)
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    return left == right


def executing() -> Checkpoint:
    ready = create_checkpoint(BINDING, created_at=T0)
    return claim_execution(ready, attempt_id=ATTEMPT, at=T0).next


def completed(payload: JSONValue = None) -> Checkpoint:
    return complete_execution(executing(), attempt_id=ATTEMPT, at=T0, result=payload).next


def delivering() -> Checkpoint:
    return claim_delivery(completed(), delivery_id=DELIVERY, at=T0).next


def via_result(payload: object, limit: int = DEFAULT) -> Result:
    return Result(payload, completed_at=T0, max_payload_bytes=limit)


def via_complete(payload: object, limit: int = DEFAULT) -> Result:
    record = executing()
    transition = complete_execution(
        record,
        attempt_id=ATTEMPT,
        at=T0,
        result=payload,
        max_payload_bytes=limit,
    )
    assert transition.next.result is not None
    return transition.next.result


BUILDERS: list[Callable[[object, int], Result]] = [via_result, via_complete]


# --- the documented numbers -------------------------------------------------------------


def test_documented_limits_are_pinned() -> None:
    assert LIMITS.default_max_payload_bytes == 65_536
    assert LIMITS.ceiling_max_payload_bytes == 10_485_760
    assert LIMITS.max_depth == 32
    assert LIMITS.max_values == 10_000
    assert LIMITS.max_identifier_chars == 256
    assert LIMITS.max_reason_chars == 1_024


# --- payload size -----------------------------------------------------------------------


@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize("char", ["a", "é", "€", "\U0001f600", "\x01", "\n", '"'])
@pytest.mark.parametrize("limit", [DEFAULT, 100_003])
def test_payload_of_exactly_the_limit_is_accepted_one_byte_more_is_refused(
    build: Callable[[object, int], Result], char: str, limit: int
) -> None:
    exact = string_of_size(limit, char)
    result = build(exact, limit)
    assert result.payload_bytes == limit
    assert result.payload == exact

    over = exact + "a"
    error = refused(OVER_LIMIT, lambda: build(over, limit))
    assert error.limit == limit

    # One multi-byte character tips it over: the count is in bytes, not characters.
    wide = string_of_size(limit - (encoded_size(char) - 2) + 1) + char
    assert encoded_size(wide) == limit + 1
    assert len(wide) <= limit
    assert refused(OVER_LIMIT, lambda: build(wide, limit)).limit == limit


@pytest.mark.parametrize("build", BUILDERS)
def test_payload_size_counts_compact_separators(build: Callable[[object, int], Result]) -> None:
    # [0,0,...,0] with n zeros is 2n + 1 bytes compact (with ", " it would be 3n).
    items = LIMITS.max_values - 1
    payload = [0] * items
    limit = 2 * items + 1
    assert build(payload, limit).payload_bytes == limit
    assert refused(OVER_LIMIT, lambda: build(payload, limit - 1)).limit == limit - 1

    mapping = {"é": ["€", {"x": None}], "b": True}
    size = encoded_size(mapping)
    assert build(mapping, size).payload_bytes == size
    refused(OVER_LIMIT, lambda: build(mapping, size - 1))


@pytest.mark.parametrize("build", BUILDERS)
def test_smallest_limit_accepts_one_byte(build: Callable[[object, int], Result]) -> None:
    assert build(0, 1).payload_bytes == 1
    assert refused(OVER_LIMIT, lambda: build(10, 1)).limit == 1
    refused(OVER_LIMIT, lambda: build(None, 1))


def test_payload_at_the_ceiling() -> None:
    exact = string_of_size(CEILING, "€")
    assert via_complete(exact, CEILING).payload_bytes == CEILING
    error = refused(OVER_LIMIT, lambda: via_result(exact + "a", CEILING))
    assert error.limit == CEILING


@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize(
    "limit", [0, -1, CEILING + 1, 2**64, True, False, 1.0, float(DEFAULT), "10", None]
)
def test_max_payload_bytes_outside_range_is_invalid_argument(
    build: Callable[[object, int], Result], limit: object
) -> None:
    error = refused(BAD_ARGUMENT, lambda: build({"a": 1}, limit))  # type: ignore[arg-type]
    assert error.field == "max_payload_bytes"


@pytest.mark.parametrize("limit", [0, CEILING + 1, True, "10"])
def test_max_payload_bytes_is_checked_by_every_reader(limit: Any) -> None:
    record = completed({"a": 1})
    raw = record.to_dict()
    calls: list[Callable[[], object]] = [
        lambda: validate_checkpoint(record, max_payload_bytes=limit),
        lambda: validate_checkpoint(raw, max_payload_bytes=limit),
        lambda: Checkpoint.from_dict(raw, max_payload_bytes=limit),
        lambda: decide_checkpoint(record, BINDING, max_payload_bytes=limit),
        lambda: claim_delivery(record, delivery_id=DELIVERY, at=T0, max_payload_bytes=limit),
    ]
    for call in calls:
        assert refused(BAD_ARGUMENT, call).field == "max_payload_bytes"


@pytest.mark.parametrize("limit", [1, CEILING])
def test_max_payload_bytes_bounds_are_accepted(limit: int) -> None:
    assert via_result(1, limit).payload_bytes == 1
    record = completed(1)
    assert validate_checkpoint(record, max_payload_bytes=limit)
    assert Checkpoint.from_dict(record.to_dict(), max_payload_bytes=limit) == record


# --- depth ------------------------------------------------------------------------------


@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize("kind", ["list", "dict", "mixed"])
@pytest.mark.parametrize("inner", [None, 1, "x"])
def test_depth_limit_is_exact(
    build: Callable[[object, int], Result], kind: str, inner: JSONValue
) -> None:
    deepest = nested(LIMITS.max_depth, kind, inner)
    assert depth_of(deepest) == LIMITS.max_depth
    assert same_json(build(deepest, DEFAULT).payload, deepest)

    too_deep = nested(LIMITS.max_depth + 1, kind, inner)
    error = refused(OVER_LIMIT, lambda: build(too_deep, DEFAULT))
    assert error.limit == LIMITS.max_depth


def test_depth_definitions() -> None:
    # A scalar is depth 0, so any number of scalars side by side is fine at top level.
    for scalar in [None, True, 0, 1.5, "x"]:
        assert same_json(via_result(scalar).payload, scalar)
    # Siblings do not add up: two branches of the maximum depth side by side.
    branch = nested(LIMITS.max_depth - 1, "mixed", 1)
    wide: JSONValue = [branch, {"a": 1}, branch, [[]]]
    assert depth_of(wide) == LIMITS.max_depth
    assert same_json(via_result(wide).payload, wide)
    # The over-deep branch is refused wherever it sits.
    over = [1, "a", {"b": nested(LIMITS.max_depth - 1, "list", 1)}]
    assert depth_of(over) == LIMITS.max_depth + 1
    refused(OVER_LIMIT, lambda: via_result(over))


def test_very_deep_payload_is_refused_without_recursion_error() -> None:
    deep: list[Any] = []
    cursor = deep
    for _ in range(100_000):
        child: list[Any] = []
        cursor.append(child)
        cursor = child
    refused(OVER_LIMIT, lambda: via_result(deep))
    refused(OVER_LIMIT, lambda: via_complete(deep))


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_self_referential_payload_is_a_checkpoint_error(kind: str) -> None:
    loop: Any
    if kind == "list":
        loop = [1]
        loop.append(loop)
    else:
        loop = {"a": 1}
        loop["self"] = loop
    for build in BUILDERS:
        with pytest.raises(CheckpointError) as caught:
            build(loop, DEFAULT)
        assert caught.value.code in {NOT_JSON, OVER_LIMIT}


# --- value count ------------------------------------------------------------------------

RAISED = 1_000_000  # so that only the value count limit can be passed below


def _count_cases() -> list[tuple[str, JSONValue, JSONValue]]:
    n = LIMITS.max_values
    return [
        ("ints", [0] * (n - 1), [0] * n),
        ("keys-do-not-count", {f"k{i}": 0 for i in range(n - 1)}, {f"k{i}": 0 for i in range(n)}),
        ("empty-containers-count", [[] for _ in range(n - 1)], [[] for _ in range(n)]),
        ("empty-objects-count", [{} for _ in range(n - 1)], [{} for _ in range(n)]),
        (
            "nested",
            [[0] * (n // 2 - 2), [0] * (n // 2 - 1)],
            [[0] * (n // 2 - 1), [0] * (n // 2 - 1)],
        ),
        ("nulls-in-object", {"a": [None] * (n - 3), "b": None}, {"a": [None] * (n - 2), "b": None}),
    ]


@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize(
    ("name", "exact", "over"), _count_cases(), ids=[case[0] for case in _count_cases()]
)
def test_value_count_limit_is_exact(
    build: Callable[[object, int], Result], name: str, exact: JSONValue, over: JSONValue
) -> None:
    assert values_in(exact) == LIMITS.max_values, name
    assert values_in(over) == LIMITS.max_values + 1, name
    assert same_json(build(exact, RAISED).payload, exact)
    assert refused(OVER_LIMIT, lambda: build(over, RAISED)).limit == LIMITS.max_values


def test_value_count_stops_early_on_a_huge_list() -> None:
    huge = [0] * 5_000_000
    refused(OVER_LIMIT, lambda: via_result(huge, CEILING))
    refused(OVER_LIMIT, lambda: via_complete(huge, CEILING))


# --- not JSON ---------------------------------------------------------------------------


class Color(enum.IntEnum):
    RED = 1


class Mode(enum.StrEnum):
    FAST = "fast"


class DictSub(dict[str, Any]):
    pass


class ListSub(list[Any]):
    pass


class StrSub(str):
    __slots__ = ()


class IntSub(int):
    pass


class FloatSub(float):
    pass


NOT_JSON_CASES: list[tuple[str, object]] = [
    ("nan", float("nan")),
    ("inf", float("inf")),
    ("-inf", float("-inf")),
    ("nested-nan", [1, [float("nan")]]),
    ("nested-inf", {"a": float("inf")}),
    ("nested-neg-inf", {"a": [{"b": float("-inf")}]}),
    ("surrogate-value", "a\ud800b"),
    ("surrogate-nested", {"a": ["\udfff"]}),
    ("surrogate-key", {"k\udc80": 1}),
    ("surrogate-pair-as-two-code-points", "\ud83d\ude00"),
    ("int-key", {1: "a"}),
    ("none-key", {None: "a"}),
    ("bool-key", {True: "a"}),
    ("tuple-key", {(1, 2): "a"}),
    ("nested-int-key", [{"a": {2: 1}}]),
    ("tuple", (1, 2)),
    ("nested-tuple", [1, (2,)]),
    ("set", {1, 2}),
    ("frozenset", frozenset({1})),
    ("bytes", b"x"),
    ("bytearray", bytearray(b"x")),
    ("object", object()),
    ("datetime", datetime(2026, 12, 2, tzinfo=UTC)),
    ("decimal", Decimal("1.5")),
    ("int-enum", Color.RED),
    ("str-enum", Mode.FAST),
    ("nested-enum", {"a": [Mode.FAST]}),
    ("dict-subclass", DictSub(a=1)),
    ("list-subclass", ListSub([1])),
    ("str-subclass", StrSub("x")),
    ("int-subclass", IntSub(1)),
    ("float-subclass", FloatSub(1.0)),
    ("nested-subclass", {"a": [IntSub(1)]}),
    ("complex", 1j),
    ("function", len),
]


@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize("value", [pytest.param(value, id=name) for name, value in NOT_JSON_CASES])
def test_non_json_payload_is_refused(build: Callable[[object, int], Result], value: object) -> None:
    refused(NOT_JSON, lambda: build(value, DEFAULT))


# --- properties -------------------------------------------------------------------------


def expected_outcome(value: object, limit: int) -> ErrorCode | None:
    """What the spec says about plain JSON ``value`` under ``limit``."""
    assert is_plain_json(value)
    if (
        depth_of(value) > LIMITS.max_depth
        or values_in(value) > LIMITS.max_values
        or encoded_size(value) > limit
    ):
        return OVER_LIMIT
    return None


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_any_json_value_is_kept_exactly(value: JSONValue) -> None:
    if expected_outcome(value, DEFAULT) is not None:
        refused(OVER_LIMIT, lambda: via_result(value))
        return
    result = via_result(value)
    assert same_json(result.payload, value)
    assert same_json(json.loads(result.payload_json), value)
    assert result.payload_bytes == encoded_size(value)
    assert len(result.payload_json.encode("utf-8")) == result.payload_bytes


@settings(max_examples=200, deadline=None)
@given(value=json_values, limit=st.integers(min_value=1, max_value=400))
def test_json_values_under_small_limits(value: JSONValue, limit: int) -> None:
    outcome = expected_outcome(value, limit)
    if outcome is None:
        assert via_result(value, limit).payload_bytes == encoded_size(value) <= limit
    else:
        refused(outcome, lambda: via_result(value, limit))


_lone_surrogate_text = st.builds(
    lambda head, surrogate, tail: head + surrogate + tail,
    st.text(max_size=3),
    st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]),
    st.text(max_size=3),
)
_garbage_scalars: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=10),
    _lone_surrogate_text,
    st.binary(max_size=4),
    st.builds(bytearray, st.binary(max_size=4)),
    st.builds(object),
    st.sampled_from([Color.RED, Mode.FAST, Decimal("2"), 1j, datetime(2026, 1, 1)]),
    st.builds(IntSub, st.integers()),
    st.builds(StrSub, st.text(max_size=3)),
    st.builds(FloatSub, st.floats(allow_nan=False)),
    st.frozensets(st.integers(), max_size=3),
    st.sets(st.text(max_size=2), max_size=3),
)
_garbage_keys: st.SearchStrategy[object] = st.one_of(
    st.text(max_size=5),
    _lone_surrogate_text,
    st.integers(),
    st.none(),
    st.booleans(),
    st.tuples(st.integers()),
)


def _garbage_containers(
    children: st.SearchStrategy[object],
) -> st.SearchStrategy[object]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_garbage_keys, children, max_size=4),
        st.tuples(children, children),
        st.builds(ListSub, st.lists(children, max_size=3)),
        st.builds(DictSub, st.dictionaries(st.text(max_size=3), children, max_size=3)),
    )


garbage: st.SearchStrategy[object] = st.recursive(
    _garbage_scalars, _garbage_containers, max_leaves=20
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=garbage, limit=st.one_of(st.just(DEFAULT), st.integers(min_value=1, max_value=200)))
def test_arbitrary_python_values_are_accepted_only_when_plain_json(
    value: object, limit: int
) -> None:
    outcome: Result | CheckpointError
    try:
        outcome = via_result(value, limit)
    except CheckpointError as error:
        outcome = error
    if isinstance(outcome, CheckpointError):
        if is_plain_json(value):
            assert outcome.code is expected_outcome(value, limit), outcome
        elif limit == DEFAULT:
            assert outcome.code is NOT_JSON, outcome
        else:
            assert outcome.code in {NOT_JSON, OVER_LIMIT}, outcome
    else:
        assert is_plain_json(value), "accepted a value that is not plain JSON"
        assert expected_outcome(value, limit) is None
        assert same_json(outcome.payload, value)


# --- identifiers ------------------------------------------------------------------------

MAX_ID = LIMITS.max_identifier_chars
BAD_IDENTIFIERS: list[tuple[str, object]] = [
    ("empty", ""),
    ("too-long", "x" * (MAX_ID + 1)),
    ("nul", "a\x00b"),
    ("newline", "a\n"),
    ("unit-separator", "\x1f"),
    ("del", "a\x7f"),
    ("nel", "\x85"),
    ("last-c1", "a\x9fb"),
    ("lone-high-surrogate", "a\ud800"),
    ("lone-low-surrogate", "\udfffz"),
    ("none", None),
    ("int", 1),
    ("bytes", b"x"),
    ("list", ["x"]),
]
GOOD_IDENTIFIERS = [
    "x",
    "x" * MAX_ID,
    "é" * MAX_ID,
    "\U0001f600" * MAX_ID,
    " ",
    "\x20~",
    "\xa0",
    "\u2028\u200b\ufeff",
    "call id with spaces",
]
BINDING_FIELDS = ["namespace", "call_id", "tool_name", "tool_revision", "input_fingerprint"]


def _binding_with(field: str, value: object) -> Binding:
    fields: dict[str, object] = dict.fromkeys(BINDING_FIELDS, "ok")
    fields[field] = value
    return Binding(**fields)  # type: ignore[arg-type]


def _identifier_calls(value: Any) -> list[tuple[str, Callable[[], object]]]:
    """Every place an identifier argument is taken, with the field name to report."""
    calls: list[tuple[str, Callable[[], object]]] = [
        (field, partial(_binding_with, field, value)) for field in BINDING_FIELDS
    ]
    ready = create_checkpoint(BINDING, created_at=T0)
    running = executing()
    done = completed()
    sending = delivering()
    calls += [
        ("attempt_id", lambda: claim_execution(ready, attempt_id=value, at=T0)),
        ("attempt_id", lambda: complete_execution(running, attempt_id=value, at=T0, result=1)),
        (
            "attempt_id",
            lambda: mark_execution_uncertain(running, attempt_id=value, at=T0, reason="r"),
        ),
        ("attempt_id", lambda: Execution(value, T0)),
        ("delivery_id", lambda: claim_delivery(done, delivery_id=value, at=T0)),
        ("delivery_id", lambda: release_delivery(sending, delivery_id=value, at=T0)),
        ("delivery_id", lambda: complete_delivery(sending, delivery_id=value, at=T0)),
        ("delivery_id", lambda: Delivery(value, T0)),
    ]
    return calls


@pytest.mark.parametrize(("name", "value"), BAD_IDENTIFIERS, ids=[c[0] for c in BAD_IDENTIFIERS])
def test_bad_identifiers_are_invalid_argument_naming_the_field(name: str, value: object) -> None:
    for field, call in _identifier_calls(value):
        error = refused(BAD_ARGUMENT, call)
        assert error.field == field, (name, field, error)


@pytest.mark.parametrize("value", GOOD_IDENTIFIERS)
def test_good_identifiers_are_accepted(value: str) -> None:
    for field in BINDING_FIELDS:
        assert getattr(_binding_with(field, value), field) == value
    ready = create_checkpoint(BINDING, created_at=T0)
    running = claim_execution(ready, attempt_id=value, at=T0).next
    assert running.execution is not None
    assert running.execution.attempt_id == value
    done = complete_execution(running, attempt_id=value, at=T0, result=None).next
    sending = claim_delivery(done, delivery_id=value, at=T0).next
    assert sending.delivery is not None
    assert sending.delivery.delivery_id == value
    finished = complete_delivery(sending, delivery_id=value, at=T0).next
    assert Checkpoint.from_dict(finished.to_dict()) == finished


@settings(max_examples=100, deadline=None)
@given(value=identifiers)
def test_any_non_control_identifier_is_accepted(value: str) -> None:
    binding = Binding(value, value, value, value, value)
    ready = create_checkpoint(binding, created_at=T0)
    running = claim_execution(ready, attempt_id=value, at=T0).next
    assert running.execution is not None
    assert running.execution.attempt_id == value
    assert Delivery(value, T0).delivery_id == value
    assert Checkpoint.from_dict(running.to_dict()) == running


@settings(max_examples=100, deadline=None)
@given(
    head=identifiers,
    bad=st.one_of(
        st.characters(min_codepoint=0x00, max_codepoint=0x1F),
        st.characters(min_codepoint=0x7F, max_codepoint=0x9F),
    ),
    position=st.integers(min_value=0),
)
def test_any_control_character_is_refused(head: str, bad: str, position: int) -> None:
    base = head[: MAX_ID - 1]
    cut = position % (len(base) + 1)
    value = base[:cut] + bad + base[cut:]
    assert len(value) <= MAX_ID
    error = refused(BAD_ARGUMENT, lambda: _binding_with("call_id", value))
    assert error.field == "call_id"


def test_binding_argument_must_be_a_binding() -> None:
    fake: Any = {"namespace": "ns"}
    assert refused(BAD_ARGUMENT, lambda: create_checkpoint(fake, created_at=T0)).field == "binding"
    record = create_checkpoint(BINDING, created_at=T0)
    assert refused(BAD_ARGUMENT, lambda: decide_checkpoint(record, fake)).field == "binding"


# --- uncertain reason -------------------------------------------------------------------

MAX_REASON = LIMITS.max_reason_chars


@pytest.mark.parametrize("reason", ["r", "x" * MAX_REASON, "€" * MAX_REASON, "\xa0 ok"])
def test_good_reasons_are_accepted(reason: str) -> None:
    uncertain = mark_execution_uncertain(executing(), attempt_id=ATTEMPT, at=T0, reason=reason)
    assert uncertain.next.execution is not None
    assert uncertain.next.execution.uncertain == Uncertainty(reason, T0)
    assert Checkpoint.from_dict(uncertain.next.to_dict()) == uncertain.next


@pytest.mark.parametrize(
    "reason",
    ["", "x" * (MAX_REASON + 1), "a\nb", "\x00", "\x7f", "\x85", "\ud800", None, 1, b"r"],
)
def test_bad_reasons_are_refused(reason: Any) -> None:
    running = executing()
    error = refused(
        BAD_ARGUMENT,
        lambda: mark_execution_uncertain(running, attempt_id=ATTEMPT, at=T0, reason=reason),
    )
    assert error.field == "reason"
    assert refused(BAD_ARGUMENT, lambda: Uncertainty(reason, T0)).field == "reason"


def test_reason_limit_is_not_the_identifier_limit() -> None:
    assert MAX_REASON > MAX_ID
    reason = "x" * (MAX_ID + 1)
    assert Uncertainty(reason, T0).reason == reason


# --- timestamps -------------------------------------------------------------------------

GOOD_TIMESTAMPS = [
    "2026-12-02T12:00:00Z",
    *(f"2026-12-02T12:00:00.{'123456789'[:digits]}Z" for digits in range(1, 10)),
    *(f"2026-12-02T12:00:00.{'9' * digits}-07:00" for digits in range(1, 10)),
    "2026-12-02T12:00:00.000000000+00:00",
    "2026-12-02T12:00:00+05:30",
    "2026-12-02T12:00:00-00:00",
    "2026-12-02T12:00:00+23:59",
    "2026-12-02T12:00:00-23:59",
    "2024-02-29T23:59:59Z",
    "2000-02-29T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999999Z",
]
BAD_TIMESTAMPS: list[object] = [
    "2026-12-02t12:00:00Z",
    "2026-12-02T12:00:00z",
    "2026-12-02T12:00:00",
    "2026-12-02T12:00:00.5",
    "2026-02-30T00:00:00Z",
    "2023-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-00-01T00:00:00Z",
    "2026-12-00T00:00:00Z",
    "2026-12-02T24:00:00Z",
    "2026-12-02T12:60:00Z",
    "2026-12-02T12:00:60Z",
    "2026-12-02T12:00:00+24:00",
    "2026-12-02T12:00:00+05:60",
    "2026-12-02T12:00:00-99:00",
    "2026-12-02T12:00:00.1234567890Z",
    "0000-01-01T00:00:00Z",
    "10000-01-01T00:00:00Z",
    "2026-12-02T12:00:00.Z",
    "2026-12-02T12:00:00Z\n",
    "\n2026-12-02T12:00:00Z",
    " 2026-12-02T12:00:00Z",
    "2026-12-02 12:00:00Z",
    "2026-12-02T12:00:00+0530",
    "2026-12-02T12:00:00+05",
    "2026-12-02T12:00Z",
    "26-12-02T12:00:00Z",
    "+2026-12-02T12:00:00Z",
    "2026-12-02T12:00:00ZZ",
    "2026-12-02T12:00:00Z+00:00",
    "\u0662\u0660\u0662\u0666-12-02T12:00:00Z",
    "2026-12-02T\uff11\uff12:00:00Z",
    "",
    None,
    1_764_676_800,
    1.5,
    b"2026-12-02T12:00:00Z",
]


def _timestamp_calls(value: Any) -> list[tuple[str, Callable[[], object]]]:
    ready = create_checkpoint(BINDING, created_at=T0)
    return [
        ("created_at", lambda: create_checkpoint(BINDING, created_at=value)),
        ("at", lambda: claim_execution(ready, attempt_id=ATTEMPT, at=value)),
        ("at", lambda: complete_execution(executing(), attempt_id=ATTEMPT, at=value, result=1)),
        ("at", lambda: claim_delivery(completed(), delivery_id=DELIVERY, at=value)),
    ]


@pytest.mark.parametrize("value", GOOD_TIMESTAMPS)
def test_good_timestamps_are_accepted_and_kept(value: str) -> None:
    record = create_checkpoint(BINDING, created_at=value)
    assert record.created_at == record.updated_at == value
    running = claim_execution(record, attempt_id=ATTEMPT, at=value).next
    assert running.updated_at == value
    assert Result(1, completed_at=value).completed_at == value
    assert Checkpoint.from_dict(running.to_dict()) == running


@pytest.mark.parametrize("value", BAD_TIMESTAMPS)
def test_bad_timestamps_are_invalid_argument(value: object) -> None:
    for field, call in _timestamp_calls(value):
        error = refused(BAD_ARGUMENT, call)
        assert error.field == field


@settings(max_examples=100, deadline=None)
@given(value=timestamps())
def test_generated_timestamps_are_accepted(value: str) -> None:
    assert create_checkpoint(BINDING, created_at=value).created_at == value


@settings(max_examples=200, deadline=None)
@given(
    year=st.integers(min_value=1, max_value=9999),
    month=st.integers(min_value=1, max_value=12),
    day=st.integers(min_value=1, max_value=31),
)
def test_calendar_dates_are_checked(year: int, month: int, day: int) -> None:
    text = f"{year:04d}-{month:02d}-{day:02d}T00:00:00Z"
    try:
        datetime(year, month, day)
    except ValueError:
        refused(BAD_ARGUMENT, lambda: create_checkpoint(BINDING, created_at=text))
    else:
        assert create_checkpoint(BINDING, created_at=text).created_at == text


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC),
        datetime(2026, 12, 2, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2026, 12, 2, 12, 0, 0, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
        datetime(1, 1, 1, tzinfo=UTC),
    ],
)
def test_aware_datetimes_are_accepted_as_the_same_instant(moment: datetime) -> None:
    record = create_checkpoint(BINDING, created_at=moment)
    assert datetime.fromisoformat(record.created_at) == moment
    running = claim_execution(record, attempt_id=ATTEMPT, at=moment).next
    assert datetime.fromisoformat(running.updated_at) == moment
    assert Checkpoint.from_dict(running.to_dict()) == running


@settings(max_examples=100, deadline=None)
@given(
    moment=st.datetimes(),
    offset=st.timedeltas(
        min_value=-timedelta(hours=23, minutes=59, seconds=59),
        max_value=timedelta(hours=23, minutes=59, seconds=59),
    ),
)
def test_aware_datetimes_with_any_offset(moment: datetime, offset: timedelta) -> None:
    aware = moment.replace(tzinfo=timezone(offset))
    if offset % timedelta(minutes=1) == timedelta(0):
        record = create_checkpoint(BINDING, created_at=aware)
        assert datetime.fromisoformat(record.created_at) == aware
        assert Checkpoint.from_dict(record.to_dict()) == record
        return
    # RFC 3339 cannot write an offset with seconds: refuse it, or keep the same instant.
    outcome: Checkpoint | CheckpointError
    try:
        outcome = create_checkpoint(BINDING, created_at=aware)
    except CheckpointError as error:
        outcome = error
    if isinstance(outcome, CheckpointError):
        assert outcome.code is BAD_ARGUMENT
    else:
        assert datetime.fromisoformat(outcome.created_at) == aware
        assert Checkpoint.from_dict(outcome.to_dict()) == outcome


def test_naive_datetime_is_refused() -> None:
    naive = datetime(2026, 12, 2, 12, 0, 0)
    for field, call in _timestamp_calls(naive):
        assert refused(BAD_ARGUMENT, call).field == field


# --- error messages never echo content --------------------------------------------------


def _assert_no_secret(error: CheckpointError) -> None:
    for text in (str(error), repr(error), error.detail, error.field or "", *map(str, error.args)):
        assert SECRET not in text, error


def _secret_failures() -> list[tuple[ErrorCode, Callable[[], object]]]:
    running = executing()
    secret_binding = Binding("ns", SECRET + "-a", "tool", "rev", "fp")
    stored = create_checkpoint(secret_binding, created_at=T0)
    other = Binding("ns", SECRET + "-b", "tool", "rev", "fp")
    big = {SECRET: SECRET * (DEFAULT // len(SECRET) + 1)}
    raw = completed({"answer": SECRET}).to_dict()
    return [
        (OVER_LIMIT, lambda: via_result(big)),
        (OVER_LIMIT, lambda: via_complete(big)),
        (OVER_LIMIT, lambda: via_result(nested(LIMITS.max_depth + 1, "dict", SECRET))),
        (OVER_LIMIT, lambda: via_result([SECRET] * (LIMITS.max_values + 1), CEILING)),
        (OVER_LIMIT, lambda: Checkpoint.from_dict(raw, max_payload_bytes=5)),
        (NOT_JSON, lambda: via_result([SECRET, float("nan")])),
        (NOT_JSON, lambda: via_result({SECRET: float("inf")})),
        (NOT_JSON, lambda: via_result({(SECRET,): 1})),
        (NOT_JSON, lambda: via_result([SECRET + "\ud800"])),
        (NOT_JSON, lambda: via_result({SECRET + "\udfff": 1})),
        (NOT_JSON, lambda: via_result((SECRET,))),
        (NOT_JSON, lambda: via_result(SECRET.encode())),
        (NOT_JSON, lambda: via_complete({"k": [SECRET, float("-inf")]})),
        (BAD_ARGUMENT, lambda: _binding_with("call_id", SECRET + "\x00")),
        (BAD_ARGUMENT, lambda: _binding_with("namespace", SECRET * 20)),
        (BAD_ARGUMENT, lambda: _binding_with("tool_name", SECRET + "\ud800")),
        (BAD_ARGUMENT, lambda: claim_execution(stored, attempt_id=SECRET + "\n", at=T0)),
        (BAD_ARGUMENT, lambda: claim_delivery(completed(), delivery_id=SECRET + "\x85", at=T0)),
        (
            BAD_ARGUMENT,
            lambda: mark_execution_uncertain(
                running, attempt_id=ATTEMPT, at=T0, reason=SECRET + "\x7f"
            ),
        ),
        (BAD_ARGUMENT, lambda: create_checkpoint(BINDING, created_at=SECRET)),
        (BAD_ARGUMENT, lambda: create_checkpoint(BINDING, created_at=T0 + SECRET)),
        (BAD_ARGUMENT, lambda: via_result(1, SECRET)),  # type: ignore[arg-type]
        (ErrorCode.BINDING_CONFLICT, lambda: decide_checkpoint(stored, other)),
        (ErrorCode.BINDING_CONFLICT, lambda: decide_checkpoint(stored.to_dict(), other)),
        (
            ErrorCode.FENCE_CONFLICT,
            lambda: complete_execution(running, attempt_id=SECRET, at=T0, result=1),
        ),
    ]


def test_error_messages_never_echo_content() -> None:
    cases = _secret_failures()
    for code, call in cases:
        _assert_no_secret(refused(code, call))


def test_binding_conflict_names_the_fields_not_the_values() -> None:
    stored = create_checkpoint(Binding("ns", SECRET + "-a", "tool", "rev", "fp"), created_at=T0)
    error = refused(
        ErrorCode.BINDING_CONFLICT,
        lambda: decide_checkpoint(stored, Binding("ns", SECRET + "-b", "tool", "rev2", "fp")),
    )
    _assert_no_secret(error)
    assert "call_id" in str(error) or "callId" in str(error)
    assert "tool_revision" in str(error) or "toolRevision" in str(error)
    assert "namespace" not in error.detail


@settings(max_examples=50, deadline=None)
@given(binding=bindings)
def test_binding_conflict_for_every_differing_field(binding: Binding) -> None:
    stored = create_checkpoint(binding, created_at=T0)
    assert decide_checkpoint(stored, binding).checkpoint == stored
    for field in BINDING_FIELDS:
        fields = {name: getattr(binding, name) for name in BINDING_FIELDS}
        fields[field] += "-changed"
        other = Binding(**fields)
        error = refused(ErrorCode.BINDING_CONFLICT, partial(decide_checkpoint, stored, other))
        assert error.field == "binding"


# --- timestamp_microseconds, check_json_shape, check_reason ---------------------------------


def _expected_microseconds(text: str) -> int:
    """The instant of a profile timestamp, computed another way: through datetime."""
    body, fraction, offset = text[:19], "", text[19:]
    if offset.startswith("."):
        digits = offset[1:]
        fraction = digits[: len(digits) - len(digits.lstrip("0123456789"))]
        offset = digits[len(fraction) :]
    offset = "+00:00" if offset == "Z" else offset
    sign = 1 if offset[0] == "+" else -1
    shift = timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])) * sign
    naive = datetime.fromisoformat(body)
    epoch = datetime(1970, 1, 1)
    whole = (naive - epoch - shift) // timedelta(microseconds=1)
    return whole + int((fraction + "000000")[:6])


@given(timestamps())
def test_timestamp_microseconds_is_the_instant(text: str) -> None:
    assert timestamp_microseconds(text) == _expected_microseconds(text)


@pytest.mark.parametrize(
    ("text", "microseconds"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:00.000001Z", 1),
        ("1970-01-01T00:00:00.1Z", 100_000),
        ("1970-01-01T00:00:00.123456789Z", 123_456),
        ("1970-01-01T01:00:00+01:00", 0),
        ("1969-12-31T19:30:00-04:30", 0),
        ("2024-02-29T23:59:59.5+23:59", 1_709_164_859_500_000),
        ("0001-01-01T00:00:00Z", -62_135_596_800_000_000),
    ],
)
def test_timestamp_microseconds_of_known_instants(text: str, microseconds: int) -> None:
    assert timestamp_microseconds(text) == microseconds


@pytest.mark.parametrize("text", ["2024-01-01", "2024-01-01T00:00:00", "", "2024-13-01T00:00:00Z"])
def test_timestamp_microseconds_refuses_unchecked_text(text: str) -> None:
    with pytest.raises(ValueError, match=r"^not a checked timestamp$"):
        timestamp_microseconds(text)


@pytest.mark.parametrize(
    ("value", "code", "detail"),
    [
        ({"a": [1, 2.5, None, True, "s"]}, None, None),
        ({"a": (1, 2)}, ErrorCode.PAYLOAD_NOT_JSON, "holds a tuple, which is not JSON"),
        ({1: "a"}, ErrorCode.PAYLOAD_NOT_JSON, "has an object key that is not a str"),
        ([math.nan], ErrorCode.PAYLOAD_NOT_JSON, "holds NaN or an infinity"),
        (math.inf, ErrorCode.PAYLOAD_NOT_JSON, "is NaN or an infinity"),
        ({1, 2}, ErrorCode.PAYLOAD_NOT_JSON, "holds a set, which is not JSON"),
    ],
)
def test_check_json_shape_checks_floats_too(
    value: object, code: ErrorCode | None, detail: str | None
) -> None:
    if code is None:
        check_json_shape(value, "value")
        return
    with pytest.raises(CheckpointError) as caught:
        check_json_shape(value, "value")
    assert (caught.value.code, caught.value.field, caught.value.detail) == (code, "value", detail)


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        (3, "a reason must be a str"),
        ("", f"a reason must have 1 to {TABLE.limits.max_reason_chars} characters"),
        (
            "x" * (TABLE.limits.max_reason_chars + 1),
            f"a reason must have 1 to {TABLE.limits.max_reason_chars} characters",
        ),
        ("line\nbreak", "a reason must not hold control characters or lone surrogates"),
    ],
)
def test_check_reason_names_what_is_wrong(value: object, detail: str) -> None:
    with pytest.raises(CheckpointError) as caught:
        check_reason(value, "reason", ErrorCode.INVALID_ARGUMENT)
    assert (caught.value.code, caught.value.field, caught.value.detail) == (
        ErrorCode.INVALID_ARGUMENT,
        "reason",
        detail,
    )
    assert check_reason("x" * TABLE.limits.max_reason_chars, "reason", ErrorCode.INVALID_ARGUMENT)


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("payload", "code", "detail"),
    [
        (
            [_nested(TABLE.limits.max_depth + 1), {1: 2}],
            ErrorCode.PAYLOAD_NOT_JSON,
            "has an object key that is not a str",
        ),
        (
            [math.nan, _nested(TABLE.limits.max_depth + 1)],
            ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
            f"nests deeper than {TABLE.limits.max_depth} containers",
        ),
        ([math.inf, [(1,)]], ErrorCode.PAYLOAD_NOT_JSON, "holds a tuple, which is not JSON"),
        ([[math.nan]], ErrorCode.PAYLOAD_NOT_JSON, "holds NaN or an infinity"),
    ],
)
def test_a_payload_with_several_faults_names_the_shallowest_and_nan_last(
    payload: object, code: ErrorCode, detail: str
) -> None:
    with pytest.raises(CheckpointError) as caught:
        encode_payload(payload, DEFAULT, "payload")
    assert (caught.value.code, caught.value.detail) == (code, detail)


@pytest.mark.parametrize(
    ("payload", "code", "detail"),
    [
        pytest.param(
            10**5000,
            ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
            "holds an integer with too many digits",
            id="a huge int",
        ),
        ({"a": "\ud800"}, ErrorCode.PAYLOAD_NOT_JSON, "holds a lone surrogate"),
        ({"a": {2: "b"}}, ErrorCode.PAYLOAD_NOT_JSON, "has an object key that is not a str"),
    ],
)
def test_encode_payload_names_the_field_and_the_fault(
    payload: object, code: ErrorCode, detail: str
) -> None:
    with pytest.raises(CheckpointError) as caught:
        encode_payload(payload, DEFAULT, "result.payload")
    assert (caught.value.code, caught.value.field, caught.value.detail) == (
        code,
        "result.payload",
        detail,
    )


@pytest.mark.parametrize("value", [1.5, -0.0, 1e308, [2.5], {"x": -1e-300}])
def test_finite_floats_pass_both_walks(value: object) -> None:
    check_json_shape(value, "value")
    text, _size = encode_payload(value, DEFAULT, "payload")
    assert json.loads(text) == value


@pytest.mark.parametrize(
    ("check", "value", "detail", "limit"),
    [
        (check_identifier, 7, "an identifier must be a str", None),
        (
            check_identifier,
            "x" * (TABLE.limits.max_identifier_chars + 1),
            f"an identifier must have 1 to {TABLE.limits.max_identifier_chars} characters",
            TABLE.limits.max_identifier_chars,
        ),
        (
            check_identifier,
            "tab\there",
            "an identifier must not hold control characters or lone surrogates",
            None,
        ),
        (check_timestamp, 1_700_000_000, "a timestamp must be a str", None),
        (check_timestamp, "2023-02-29T00:00:00Z", "a timestamp names a day its month lacks", None),
        (check_timestamp, "2024-04-31T00:00:00Z", "a timestamp names a day its month lacks", None),
    ],
)
def test_single_value_checks_name_the_fault_and_limit(
    check: Callable[[object, str, ErrorCode], str], value: object, detail: str, limit: int | None
) -> None:
    with pytest.raises(CheckpointError) as caught:
        check(value, "field", ErrorCode.INVALID_CHECKPOINT)
    error = caught.value
    assert (error.code, error.field, error.detail, error.limit) == (
        ErrorCode.INVALID_CHECKPOINT,
        "field",
        detail,
        limit,
    )


@pytest.mark.parametrize("day", ["2024-02-29", "2023-02-28", "2024-04-30", "2024-12-31"])
def test_the_last_day_of_each_month_is_a_day(day: str) -> None:
    assert check_timestamp(f"{day}T00:00:00Z", "at", ErrorCode.INVALID_ARGUMENT)


@pytest.mark.parametrize("value", [0, TABLE.limits.ceiling_max_payload_bytes + 1, True, 1.0])
def test_a_bad_payload_limit_names_the_ceiling(value: object) -> None:
    ceiling = TABLE.limits.ceiling_max_payload_bytes
    with pytest.raises(CheckpointError) as caught:
        Result(1, completed_at="2024-01-01T00:00:00Z", max_payload_bytes=value)  # type: ignore[arg-type]
    error = caught.value
    assert (error.code, error.field, error.detail, error.limit) == (
        ErrorCode.INVALID_ARGUMENT,
        "max_payload_bytes",
        f"must be an int from 1 to {ceiling}",
        ceiling,
    )


def test_a_payload_over_the_value_count_names_the_limit() -> None:
    limit = TABLE.limits.max_values
    with pytest.raises(CheckpointError) as caught:
        encode_payload([[0] * (limit // 2), [0] * (limit // 2)], DEFAULT, "payload")
    error = caught.value
    assert (error.code, error.field, error.detail, error.limit) == (
        ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
        "payload",
        f"holds more than {limit} values",
        limit,
    )


def _surrogate_free(value: object) -> bool:
    """Whether no str in ``value`` (keys included) holds a lone surrogate."""
    if isinstance(value, str):
        return not any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, list):
        return all(map(_surrogate_free, value))
    if isinstance(value, dict):
        return all(_surrogate_free(key) and _surrogate_free(item) for key, item in value.items())
    return True


@given(
    st.one_of(
        json_values,
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
        st.lists(st.floats(allow_nan=False, allow_infinity=False)),
    ).filter(_surrogate_free)
)
def test_the_encoder_writes_what_json_dumps_writes(value: JSONValue) -> None:
    # encode_payload's encoder is built once from the C encoder's settings; its text must
    # be json.dumps's, compact with non-ASCII kept, byte for byte (a top-level str and
    # floats' repr included).
    text, size = encode_payload(value, TABLE.limits.ceiling_max_payload_bytes, "payload")
    assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert size == len(text.encode("utf-8"))


@pytest.mark.parametrize("value", [math.nan, [math.inf], {"x": -math.inf}])
def test_the_encoder_refuses_what_json_dumps_refuses(value: object) -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        json.dumps(value, allow_nan=False)
    refused(ErrorCode.PAYLOAD_NOT_JSON, lambda: encode_payload(value, DEFAULT, "payload"))


def test_a_value_the_c_encoder_refuses_goes_to_the_encoders_own_path() -> None:
    # Never a payload the walk passed: only a stand-in (CrossHair's symbolic values)
    # gets there, and a real value is refused as JSONEncoder.encode refuses it.
    with pytest.raises(TypeError, match="not JSON serializable"):
        validation._ENCODE(object())
