"""MemoryStore passes the whole conformance suite: plain checks, harness, threads."""

from __future__ import annotations

from tool_execution_checkpoint.memory import MemoryStore
from tool_execution_checkpoint.testing import StoreConformance


class TestMemoryStore(StoreConformance):
    def make_store(self) -> MemoryStore:
        return MemoryStore()
