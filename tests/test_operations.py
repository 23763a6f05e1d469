"""Operator work: listing records by status and age, and pruning delivered payloads."""

from __future__ import annotations

import pytest

from strategies import _walk
from tool_execution_checkpoint import (
    Action,
    Binding,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    Status,
    checkpoint_key,
    create_checkpoint,
    decide_checkpoint,
)
from tool_execution_checkpoint.operations import prune_delivered

OLD, NEW, NOW = "2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z"
DAY_US = 86_400 * 1_000_000


def _binding(index: int) -> Binding:
    return Binding("ops", f"call-{index}", "tool", "1", "sha256:0")


def _filled() -> tuple[MemoryStore, dict[str, tuple[Status, str]]]:
    """One record per status per age, stored under its key."""
    store = MemoryStore()
    placed: dict[str, tuple[Status, str]] = {}
    index = 0
    for status in Status:
        for stamp in (OLD, NEW):
            binding = _binding(index)
            record = _walk(
                create_checkpoint(binding, created_at=stamp), status, {"n": index}, stamp
            )
            key = checkpoint_key(binding)
            assert store.create_if_absent(key, create_checkpoint(binding, created_at=stamp))
            # Test setup: place the walked record as if its transitions had been swapped in.
            store._texts[key] = record.to_json()
            store._revisions[key] = record.revision
            placed[key] = (status, stamp)
            index += 1
    return store, placed


def test_list_records_filters_by_status_and_age_in_key_order() -> None:
    store, placed = _filled()
    cutoff = 1_780_000_000 * 1_000_000  # between OLD and NEW
    rows = store.list_records([Status.EXECUTING, Status.DELIVERING], updated_before_us=cutoff)
    expected = sorted(
        key
        for key, (status, stamp) in placed.items()
        if status in (Status.EXECUTING, Status.DELIVERING) and stamp == OLD
    )
    assert [row.key for row in rows] == expected
    assert all(row.updated_at == OLD for row in rows)
    everything = store.list_records(list(Status))
    assert [row.key for row in everything] == sorted(placed)


def test_list_records_pages_after_a_key() -> None:
    store, placed = _filled()
    seen: list[str] = []
    after = None
    while page := store.list_records(list(Status), after_key=after, limit=5):
        assert len(page) <= 5
        seen += [row.key for row in page]
        after = page[-1].key
    assert seen == sorted(placed)


def test_prune_touches_only_old_delivered_records_and_leaves_tombstones() -> None:
    store, placed = _filled()
    before = {key: store.get(key) for key in placed}
    examined: list[int] = []
    pruned = prune_delivered(
        store, retention_us=DAY_US, at=NOW, page_size=3, progress=examined.append
    )
    old_delivered = [k for k, (s, t) in placed.items() if s is Status.DELIVERED and t == OLD]
    assert pruned == len(old_delivered) == 1
    assert examined == [1]
    for key, (status, _stamp) in placed.items():
        after = store.get(key)
        assert after is not None
        if key in old_delivered:
            assert after["result"]["payload"] is None
            assert after["result"]["prunedAt"] == NOW
            assert after["revision"] == before[key]["revision"] + 1  # type: ignore[index]
        else:
            assert after == before[key], f"{status} was touched"
    assert prune_delivered(store, retention_us=DAY_US, at=NOW) == 0  # nothing left to drop


def test_a_replayed_call_finds_the_tombstone_never_ready() -> None:
    store, placed = _filled()
    prune_delivered(store, retention_us=0, at=NOW)
    index = next(
        i
        for i in range(len(placed))
        if placed[checkpoint_key(_binding(i))] == (Status.DELIVERED, OLD)
    )
    binding = _binding(index)
    key = checkpoint_key(binding)
    assert store.create_if_absent(key, create_checkpoint(binding, created_at=NOW)) is False
    stored = store.get(key)
    assert stored is not None
    assert decide_checkpoint(stored, binding).action is Action.NONE
    changed = Binding(binding.namespace, binding.call_id, "tool", "2", "sha256:other")
    with pytest.raises(CheckpointError) as caught:
        decide_checkpoint(stored, changed)
    assert caught.value.code is ErrorCode.BINDING_CONFLICT


def test_prune_refuses_a_negative_retention() -> None:
    with pytest.raises(CheckpointError) as caught:
        prune_delivered(MemoryStore(), retention_us=-1, at=NOW)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"statuses": "ready"}, "statuses"),
        ({"statuses": ["ready", "paused"]}, "statuses"),
        ({"statuses": [Status.READY], "limit": 0}, "limit"),
        ({"statuses": [Status.READY], "limit": -1}, "limit"),
        ({"statuses": [Status.READY], "limit": True}, "limit"),
        ({"statuses": [Status.READY], "updated_before_us": 1.5}, "updated_before_us"),
        ({"statuses": [Status.READY], "after_key": 3}, "after_key"),
        ({"statuses": [Status.READY], "after_key": "\ud800"}, "after_key"),
    ],
)
def test_list_records_refuses_bad_arguments(arguments: dict[str, object], field: str) -> None:
    store, _ = _filled()
    arguments = dict(arguments)  # the parameter is shared by every run in this process
    statuses = arguments.pop("statuses")
    with pytest.raises(CheckpointError) as caught:
        store.list_records(statuses, **arguments)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert caught.value.field == field
