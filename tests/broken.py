"""Deliberately broken stores: each breaks one rule of the storage contract, and the
harness must catch each within its default budget (broken hosts: broken_hosts.py)."""

from __future__ import annotations

import time

from tool_execution_checkpoint import Checkpoint, Status
from tool_execution_checkpoint.stores.memory import MemoryStore


class RacyStore(MemoryStore):
    """Compare-and-swap as a read followed by a separate write: not atomic."""

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        del durable  # every write is kept the same way
        stored = self.get(key)
        if stored is None or stored["revision"] != expected_revision:
            return False
        time.sleep(0.001)  # a network round trip between the read and the write
        with self._lock:
            self._texts[key] = record.to_json()
            self._revisions[key] = record.revision
        return True


class RevisionBlindStore(MemoryStore):
    """Compare-and-swap that ignores the expected revision."""

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        del durable  # every write is kept the same way
        del expected_revision  # the bug
        with self._lock:
            if key not in self._texts:
                return False
            self._texts[key] = record.to_json()
            self._revisions[key] = record.revision
            return True


class OverwritingStore(MemoryStore):
    """Create-if-absent that overwrites an existing record."""

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        with self._lock:
            self._texts[key] = record.to_json()
            self._revisions[key] = record.revision
            return True


class ForgetfulStore(MemoryStore):
    """Acknowledges the compare-and-swap that stores an execution's result (with its
    delivery claim, or alone), then loses it (a write-back cache that dies before it
    flushes)."""

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        if record.status in (Status.COMPLETED, Status.DELIVERING):
            with self._lock:
                return self._revisions.get(key) == expected_revision
        return super().compare_and_swap(key, expected_revision, record, durable=durable)
