"""MemoryStore passes the whole conformance suite: plain checks, harness, threads, and
the garbage checks (a test writes its text table directly)."""

from __future__ import annotations

from tool_execution_checkpoint.stores.memory import MemoryStore
from tool_execution_checkpoint.testing import OperableStoreConformance


class TestMemoryStore(OperableStoreConformance):
    store_clock = False

    def make_store(self) -> MemoryStore:
        return MemoryStore()

    def write_raw(self, store: MemoryStore, key: str, raw: bytes) -> None:
        """The store keeps text: bytes that are not UTF-8 become lone surrogates."""
        store._texts[key] = raw.decode("utf-8", "surrogateescape")
        store._revisions[key] = 1
