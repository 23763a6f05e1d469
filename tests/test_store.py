"""The storage contract as code: keys, write checks, and the async adapter."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given

from strategies import bindings, short_identifiers
from tool_execution_checkpoint import (
    AsyncCheckpointStore,
    Binding,
    Checkpoint,
    CheckpointError,
    CheckpointStore,
    ErrorCode,
    MemoryStore,
    checkpoint_key,
    claim_execution,
    create_checkpoint,
)
from tool_execution_checkpoint.testing import StoreConformance, SyncStoreAdapter, as_sync_store

NOW = "2026-01-01T00:00:00Z"


def test_keys_do_not_collide_when_a_separator_moves() -> None:
    left = Binding("a:b", "c", "tool", "1", "sha256:0")
    right = Binding("a", "b:c", "tool", "1", "sha256:0")
    assert checkpoint_key(left) != checkpoint_key(right)


@given(first=bindings, second=bindings)
def test_keys_are_equal_exactly_when_namespace_and_call_id_are(
    first: Binding, second: Binding
) -> None:
    same_call = (first.namespace, first.call_id) == (second.namespace, second.call_id)
    assert (checkpoint_key(first) == checkpoint_key(second)) == same_call


@given(binding=bindings, tool_name=short_identifiers, fingerprint=short_identifiers)
def test_a_changed_tool_or_input_keeps_the_key_so_decide_sees_the_conflict(
    binding: Binding, tool_name: str, fingerprint: str
) -> None:
    changed = Binding(binding.namespace, binding.call_id, tool_name, "2", fingerprint)
    assert checkpoint_key(changed) == checkpoint_key(binding)


def test_key_shape_is_fixed() -> None:
    key = checkpoint_key(Binding("n" * 256, "c" * 256, "t", "1", "f"))
    assert key.startswith("tec1-")
    assert len(key) == len("tec1-") + 64


def test_checkpoint_key_refuses_a_non_binding() -> None:
    with pytest.raises(CheckpointError) as caught:
        checkpoint_key(("ns", "call"))  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_memory_store_satisfies_the_protocols() -> None:
    assert isinstance(MemoryStore(), CheckpointStore)
    assert isinstance(AsyncMemoryStore(), AsyncCheckpointStore)


def test_memory_store_returns_fresh_mappings() -> None:
    store = MemoryStore()
    binding = Binding("ns", "call", "tool", "1", "sha256:0")
    key = checkpoint_key(binding)
    store.create_if_absent(key, create_checkpoint(binding, created_at=NOW))
    first = store.get(key)
    assert first is not None
    first["status"] = "delivered"  # type: ignore[index]
    assert store.get(key) == create_checkpoint(binding, created_at=NOW).to_dict()
    assert len(store) == 1
    assert list(store.keys()) == [key]


def test_swap_refuses_a_revision_jump() -> None:
    store = MemoryStore()
    binding = Binding("ns", "call", "tool", "1", "sha256:0")
    created = create_checkpoint(binding, created_at=NOW)
    store.create_if_absent(checkpoint_key(binding), created)
    claim = claim_execution(created, attempt_id="a", at=NOW)
    with pytest.raises(CheckpointError) as caught:
        store.compare_and_swap(checkpoint_key(binding), 0, claim.next)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT
    assert caught.value.field == "expected_revision"


class AsyncMemoryStore:
    """An asyncio store over MemoryStore, to run the conformance suite through the
    adapter."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.closed = False

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        await asyncio.sleep(0)
        return self.inner.create_if_absent(key, record)

    async def get(self, key: str) -> Mapping[str, Any] | None:
        await asyncio.sleep(0)
        return self.inner.get(key)

    async def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        await asyncio.sleep(0)
        return self.inner.compare_and_swap(key, expected_revision, record, durable=durable)

    async def aclose(self) -> None:
        self.closed = True


class TestAsyncStoreThroughTheAdapter(StoreConformance):
    harness_examples = 50

    def make_store(self) -> AsyncMemoryStore:
        return AsyncMemoryStore()

    def write_raw(self, store: AsyncMemoryStore, key: str, raw: bytes) -> None:
        """Into the memory store the async one runs over (text; bad UTF-8 as surrogates)."""
        store.inner._texts[key] = raw.decode("utf-8", "surrogateescape")
        store.inner._revisions[key] = 1


def test_the_adapter_runs_an_async_factory_and_closes_the_store() -> None:
    async def factory() -> AsyncMemoryStore:
        return AsyncMemoryStore()

    adapter = as_sync_store(factory())
    assert isinstance(adapter, SyncStoreAdapter)
    binding = Binding("ns", "call", "tool", "1", "sha256:0")
    assert adapter.create_if_absent(
        checkpoint_key(binding), create_checkpoint(binding, created_at=NOW)
    )
    inner = adapter.inner
    adapter.close()
    assert isinstance(inner, AsyncMemoryStore)
    assert inner.closed


def test_as_sync_store_refuses_something_that_is_not_a_store() -> None:
    with pytest.raises(TypeError):
        as_sync_store(object())
