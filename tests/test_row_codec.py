"""The row codec of stores/core.py: a record to the text a store keeps and back, read once.

Every store of this package writes a record's compact JSON text and reads it back through
``decode_stored``, which hands on the record it validated: ``get`` returns a StoredRecord
and the transitions take its checkpoint without validating the mapping again."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteStore,
    checkpoint_key,
    claim_execution,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
)
from tool_execution_checkpoint.records import StoredRecord
from tool_execution_checkpoint.stores import (
    BrokenRecord,
    CheckpointStore,
    RecordSummary,
    decode_stored,
    encode_create,
    encode_swap,
    listing_line,
)
from tool_execution_checkpoint.validation import timestamp_microseconds

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T01:00:00.5+02:00"
BINDING = Binding("ns", "call-1", "tool", "1", "sha256:0")
KEY = checkpoint_key(BINDING)


def _completed() -> Checkpoint:
    claim = claim_execution(create_checkpoint(BINDING, created_at=NOW), attempt_id="a", at=NOW)
    payload = {"rows": [1, 1.0, -0.0, "é"], "deep": {"x": None}}
    return complete_execution(claim.next, attempt_id="a", at=LATER, result=payload).next


def _refusal(action: Callable[[], object]) -> CheckpointError:
    with pytest.raises(CheckpointError) as caught:
        action()
    return caught.value


# --- writing --------------------------------------------------------------------------------


def test_a_write_keeps_the_records_compact_json_text_and_its_time() -> None:
    created = create_checkpoint(BINDING, created_at=LATER)
    encoded = encode_create(KEY, created)
    assert encoded.record is created
    assert encoded.text == created.to_json()
    assert encoded.updated_us == timestamp_microseconds(LATER)
    following = _completed()
    swapped = encode_swap(KEY, following.revision - 1, following)
    assert swapped.record is following
    assert swapped.text == following.to_json()
    assert swapped.updated_us == timestamp_microseconds(following.updated_at)


def test_a_write_refuses_what_the_argument_checks_refuse() -> None:
    created = create_checkpoint(BINDING, created_at=NOW)
    assert _refusal(lambda: encode_create("", created)).field == "key"
    assert _refusal(lambda: encode_create(KEY, created.to_dict())).field == "record"
    assert _refusal(lambda: encode_create(KEY, _completed())).field == "record.revision"
    assert _refusal(lambda: encode_swap(KEY, 1, created)).field == "expected_revision"
    assert _refusal(lambda: encode_swap(KEY, True, _completed())).field == "expected_revision"
    assert _refusal(lambda: encode_swap("\x00", 2, _completed())).field == "key"


# --- reading --------------------------------------------------------------------------------


def test_a_read_is_the_stored_object_with_the_record_it_validated_as() -> None:
    record = _completed()
    text = record.to_json()
    stored = decode_stored(text.encode("utf-8"))
    assert type(stored) is StoredRecord
    assert stored == json.loads(text) == record.to_dict()
    assert json.dumps(stored, ensure_ascii=False, separators=(",", ":")) == text
    assert stored.checkpoint == record
    assert decode_stored(text) is not stored  # a fresh one on every read


def test_decide_and_the_transitions_take_a_reads_record_as_it_is() -> None:
    stored = decode_stored(_completed().to_json())
    assert decide_checkpoint(stored, BINDING).checkpoint is stored.checkpoint
    assert Checkpoint.from_dict(stored) is stored.checkpoint
    # A plain mapping of the same record is validated: a new Checkpoint, equal.
    plain = decide_checkpoint(dict(stored), BINDING).checkpoint
    assert plain is not stored.checkpoint
    assert plain == stored.checkpoint


@pytest.mark.parametrize("plain", [False, True], ids=["read", "plain"])
def test_a_smaller_payload_limit_is_still_checked_as_for_a_plain_mapping(plain: bool) -> None:
    stored = decode_stored(_completed().to_json())
    record = dict(stored) if plain else stored
    size = stored.checkpoint.result.payload_bytes if stored.checkpoint.result else 0
    assert decide_checkpoint(record, BINDING, max_payload_bytes=size).checkpoint
    error = _refusal(lambda: decide_checkpoint(record, BINDING, max_payload_bytes=size - 1))
    assert (error.code, error.field, error.limit) == (
        ErrorCode.PAYLOAD_LIMIT_EXCEEDED,
        "result.payload",
        size - 1,
    )
    refused = _refusal(lambda: decide_checkpoint(record, BINDING, max_payload_bytes=0))
    assert refused.code is ErrorCode.INVALID_ARGUMENT


def _changes() -> Iterator[Callable[[StoredRecord], object]]:
    yield lambda stored: stored.__setitem__("status", "no status")
    yield lambda stored: stored.__delitem__("revision")
    yield lambda stored: stored.update(revision=0)
    yield lambda stored: stored.pop("binding")
    yield lambda stored: stored.popitem()
    yield lambda stored: stored.setdefault("extra", 1)
    yield lambda stored: stored.clear()
    yield lambda stored: stored.__ior__({"result": None})


@pytest.mark.parametrize("change", list(_changes()))
def test_a_changed_read_is_validated_again(change: Callable[[StoredRecord], object]) -> None:
    stored = decode_stored(_completed().to_json())
    change(stored)
    assert _refusal(lambda: decide_checkpoint(stored, BINDING)).code is (
        ErrorCode.INVALID_CHECKPOINT
    )


def test_a_copy_of_a_read_is_a_plain_dict() -> None:
    stored = decode_stored(_completed().to_json())
    for copied in (dict(stored), copy.copy(stored), copy.deepcopy(stored)):
        assert type(copied) is dict
        assert copied == stored
    assert type(pickle.loads(pickle.dumps(stored))) is dict
    deep = copy.deepcopy(stored)
    deep["result"]["payload"]["rows"].append(2)
    assert stored == _completed().to_dict()


def test_only_the_decoder_makes_a_read() -> None:
    with pytest.raises(TypeError):
        StoredRecord(_completed().to_dict())


def test_a_listing_line_is_the_records_summary_or_a_broken_record() -> None:
    record = _completed()
    line = listing_line(KEY, record.to_json())
    assert line == RecordSummary.of(KEY, record)
    assert isinstance(line, RecordSummary)
    assert line.written_us == timestamp_microseconds(record.updated_at)
    assert listing_line(KEY, record.to_json(), written_us=7).written_us == 7  # type: ignore[union-attr]
    broken = listing_line(KEY, b"\xff", written_us=7)
    assert isinstance(broken, BrokenRecord)
    assert (broken.key, broken.code) == (KEY, ErrorCode.INVALID_CHECKPOINT)
    assert "not the JSON text of an object" in broken.reason


# --- every store of this package reads once -------------------------------------------------


def _memory(_: Path) -> CheckpointStore:
    return MemoryStore()


def _sqlite(directory: Path) -> CheckpointStore:
    return SQLiteStore(directory / "store.db")


@pytest.mark.parametrize("make", [_memory, _sqlite], ids=["memory", "sqlite"])
def test_a_stores_read_is_decided_without_validating_it_again(
    make: Callable[[Path], Any], tmp_path: Path
) -> None:
    store = make(tmp_path)
    created = create_checkpoint(BINDING, created_at=NOW)
    assert store.create_if_absent(KEY, created)
    stored = store.get(KEY)
    assert type(stored) is StoredRecord
    assert stored.checkpoint == created
    assert decide_checkpoint(stored, BINDING).checkpoint is stored.checkpoint
    store.close()
