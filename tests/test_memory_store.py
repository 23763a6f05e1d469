"""MemoryStore passes the whole conformance suite: plain checks, harness, threads."""

from __future__ import annotations

from tool_execution_checkpoint.memory import MemoryStore
from tool_execution_checkpoint.testing import OperableStoreConformance


class TestMemoryStore(OperableStoreConformance):
    def make_store(self) -> MemoryStore:
        return MemoryStore()
