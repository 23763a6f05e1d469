"""fingerprint: canonical JSON, SHA-256, non-JSON refused."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import pytest
from hypothesis import given

from strategies import json_values
from tool_execution_checkpoint import CheckpointError, ErrorCode, JSONValue, fingerprint


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
