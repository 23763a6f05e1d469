"""A MemoryStore that keeps each write it was asked for, with the durability the caller
passed: how the tests count a call's writes and check what each tells the store."""

from __future__ import annotations

from typing import NamedTuple

from tool_execution_checkpoint import Checkpoint, MemoryStore, Status


class Write(NamedTuple):
    """One write asked of the store: a create (always durable) or a swap."""

    kind: str
    status: Status
    durable: bool


class CountingStore(MemoryStore):
    """Keeps every create and swap asked of it in :attr:`writes`, landed or not."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[Write] = []

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        self.writes.append(Write("create", record.status, True))
        return super().create_if_absent(key, record)

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        self.writes.append(Write("swap", record.status, durable))
        return super().compare_and_swap(key, expected_revision, record, durable=durable)
