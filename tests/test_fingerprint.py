"""fingerprint: canonical JSON, SHA-256, non-JSON refused; arguments_fingerprint keeps
typed inputs apart exactly when they differ."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import decimal
import enum
import hashlib
import json
import math
import threading
import uuid
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import json_values
from tool_execution_checkpoint import (
    CheckpointError,
    ErrorCode,
    JSONValue,
    arguments_fingerprint,
    canonical,
    fingerprint,
)


def test_a_known_vector() -> None:
    canonical = '{"a":1,"b":[true,null,"é",1.5]}'.encode()
    expected = "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert fingerprint({"b": [True, None, "é", 1.5], "a": 1}) == expected


@given(value=json_values)
def test_key_order_does_not_matter_and_the_shape_is_fixed(value: JSONValue) -> None:
    def reorder(item: Any) -> Any:
        if isinstance(item, dict):
            return {key: reorder(item[key]) for key in reversed(list(item))}
        if isinstance(item, list):
            return [reorder(element) for element in item]
        return item

    digest = fingerprint(value)
    assert fingerprint(reorder(value)) == digest
    assert digest.startswith("sha256:")
    assert len(digest) == len("sha256:") + 64


@pytest.mark.parametrize(
    ("left", "right"),
    [(1, 1.0), ({"a": 1}, {"a": "1"}), ([1, 2], [2, 1]), ("", None), (0.0, -0.0), (True, 1)],
)
def test_different_values_differ(left: object, right: object) -> None:
    assert fingerprint(left) != fingerprint(right)


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, (1, 2), {1: "a"}, {"a": {1, 2}}, b"x", "\ud800", {"\udfff": 1}, object()],
)
def test_non_json_is_refused(value: object) -> None:
    with pytest.raises(CheckpointError) as caught:
        fingerprint(value)
    assert caught.value.code is ErrorCode.PAYLOAD_NOT_JSON


# --- arguments_fingerprint: typed inputs ---------------------------------------------------


class Colour(enum.Enum):
    RED = 1
    ONE = "1"


class Level(enum.IntEnum):
    LOW = 1


class Card(pydantic.BaseModel):
    """A model with a secret, an excluded field and a private attribute."""

    number: pydantic.SecretStr
    tenant: str = pydantic.Field(default="t", exclude=True)
    _region: str = pydantic.PrivateAttr(default="eu")


class Voucher(pydantic.BaseModel):
    """Card's fields under another class: another intent."""

    number: pydantic.SecretStr
    tenant: str = pydantic.Field(default="t", exclude=True)
    _region: str = pydantic.PrivateAttr(default="eu")


@dataclasses.dataclass
class Parcel:
    to: str
    note: str = dataclasses.field(default="", compare=False)


_texts = st.sampled_from(["", "a", "b", "1", "**********"])
_leaves: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from([0.0, -0.0, 1.0, 0.5, math.nan, math.inf]),
    _texts,
    st.binary(max_size=2),
    st.sampled_from(list(Colour) + list(Level)),
    st.sampled_from(
        [
            datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.UTC),
            datetime.datetime(
                2026, 1, 1, 13, tzinfo=datetime.timezone(datetime.timedelta(hours=1))
            ),
            datetime.datetime(2026, 1, 1, 12),
            datetime.date(2026, 1, 1),
            datetime.timedelta(seconds=1),
            decimal.Decimal("1.0"),
            decimal.Decimal("1.00"),
            uuid.UUID(int=1),
        ]
    ),
    st.builds(Parcel, _texts, _texts),
)


def _card(kind: type[Card] | type[Voucher], number: str, tenant: str, region: str) -> object:
    card = kind(number=pydantic.SecretStr(number), tenant=tenant)
    card._region = region
    return card


_pair = st.sampled_from(["a", "b"])
_models = st.builds(_card, st.sampled_from([Card, Voucher]), _pair, _pair, _pair)
_values: st.SearchStrategy[object] = st.recursive(
    st.one_of(_leaves, _models),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_texts, inner, max_size=3),
        st.sets(st.integers(-2, 2) | _texts, max_size=3),
        st.frozensets(st.integers(-2, 2), max_size=3),
    ),
    max_leaves=6,
)


def _reference(value: object) -> object:
    """What makes two inputs the same, written apart from the encoder: the same types
    holding the same values, a secret by its value, every field of a model or dataclass."""
    if isinstance(value, pydantic.SecretStr):
        return ("secret", value.get_secret_value())
    if isinstance(value, pydantic.BaseModel):
        fields = tuple(sorted((k, _reference(v)) for k, v in vars(value).items()))
        return (
            type(value).__name__,
            fields,
            tuple(sorted((value.__pydantic_private__ or {}).items())),
        )
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, tuple(map(_reference, dataclasses.astuple(value))))
    if isinstance(value, enum.Enum):
        return (type(value).__name__, value.name)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, datetime.datetime):
        return ("datetime", value.timetuple()[:6], value.utcoffset(), value.fold)
    if isinstance(value, decimal.Decimal):
        return ("decimal", value.as_tuple())
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(map(_reference, value)))
    if isinstance(value, dict):
        return ("dict", frozenset((k, _reference(v)) for k, v in value.items()))
    if isinstance(value, set | frozenset):
        return (type(value).__name__, frozenset(map(_reference, value)))
    return (type(value).__name__, value)


@settings(max_examples=400)
@given(left=_values, right=_values)
def test_typed_inputs_share_a_fingerprint_exactly_when_they_are_the_same(
    left: object, right: object
) -> None:
    same = _reference(left) == _reference(right)
    assert (arguments_fingerprint({"x": left}) == arguments_fingerprint({"x": right})) is same


@settings(max_examples=300)
@given(left=st.one_of(_leaves, _models), right=st.one_of(_leaves, _models))
def test_leaves_and_models_share_a_fingerprint_exactly_when_they_are_the_same(
    left: object, right: object
) -> None:
    same = _reference(left) == _reference(right)
    assert (arguments_fingerprint({"x": left}) == arguments_fingerprint({"x": right})) is same


@given(value=_values)
def test_a_copy_has_the_same_fingerprint(value: object) -> None:
    assert arguments_fingerprint({"x": copy.deepcopy(value)}) == arguments_fingerprint({"x": value})


def test_what_json_would_collapse_stays_apart() -> None:
    pairs: list[tuple[object, object]] = [
        ((1, 2), [1, 2]),
        ("1", decimal.Decimal("1")),
        (Colour.ONE, "1"),
        (Level.LOW, 1),
        (b"ab", "ab"),
        ({1: "a"}, {"1": "a"}),
        ({1, 2}, [1, 2]),
        (_card(Card, "4111", "t", "eu"), _card(Card, "4242", "t", "eu")),
        (_card(Card, "4111", "a", "eu"), _card(Card, "4111", "b", "eu")),
        (_card(Card, "4111", "t", "eu"), _card(Card, "4111", "t", "us")),
        (_card(Card, "4111", "t", "eu"), _card(Voucher, "4111", "t", "eu")),
        (Parcel("a", "x"), Parcel("a", "y")),
    ]
    for left, right in pairs:
        assert arguments_fingerprint({"x": left}) != arguments_fingerprint({"x": right})


def test_a_secret_is_in_the_canonical_form_only_as_a_digest() -> None:
    form = json.dumps(canonical(_card(Card, "4111-SECRET", "t", "eu")))
    assert "4111-SECRET" not in form
    assert hashlib.sha256(b"4111-SECRET").hexdigest() in form


@pytest.mark.parametrize("value", [object(), threading.Lock(), lambda: None, iter([])])
def test_what_cannot_be_encoded_is_refused_by_type_only(value: object) -> None:
    with pytest.raises(CheckpointError) as caught:
        arguments_fingerprint({"x": value})
    assert caught.value.code is ErrorCode.PAYLOAD_NOT_JSON
    assert type(value).__name__ in str(caught.value)


def test_a_cycle_is_refused_at_the_depth_limit() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(CheckpointError) as caught:
        arguments_fingerprint({"x": loop})
    assert caught.value.code is ErrorCode.PAYLOAD_LIMIT_EXCEEDED
