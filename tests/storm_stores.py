"""Shared stores for the kill-storm tests: worker processes import them by name."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

from contract_stores import JsonFilesStore
from tool_execution_checkpoint import Checkpoint
from tool_execution_checkpoint.stores import check_create, check_swap


class PlainSQLiteStore:
    """A minimal honest store on one SQLite file: one statement per operation."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30)
        # Switching the journal mode takes a lock the busy timeout does not cover, so it
        # is done once, by the first opener (the tests open the file before the storm).
        if self.db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS c (key TEXT PRIMARY KEY, revision INTEGER, record TEXT)"
        )

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        check_create(key, record)
        row = (key, record.revision, record.to_json())
        sql = "INSERT INTO c VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
        return self.db.execute(sql, row).rowcount == 1

    def get(self, key: str) -> Mapping[str, Any] | None:
        row = self.db.execute("SELECT record FROM c WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        del durable  # every write is kept the same way
        check_swap(key, expected_revision, record)
        row = (record.revision, record.to_json(), key, expected_revision)
        sql = "UPDATE c SET revision = ?, record = ? WHERE key = ? AND revision = ?"
        return self.db.execute(sql, row).rowcount == 1

    def close(self) -> None:
        self.db.close()


class TornWriteStore(PlainSQLiteStore):
    """Broken: a CAS in two commits (first the revision, then the record), so a process
    killed between them leaves a record that never was written whole."""

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        del durable  # every write is kept the same way
        check_swap(key, expected_revision, record)
        moved = self.db.execute(
            "UPDATE c SET revision = ? WHERE key = ? AND revision = ?",
            (record.revision, key, expected_revision),
        ).rowcount
        if moved != 1:
            return False
        time.sleep(0.005)  # the window a crash falls into
        self.db.execute("UPDATE c SET record = ? WHERE key = ?", (record.to_json(), key))
        return True


class ProcessLocalStore(PlainSQLiteStore):
    """Broken: a CAS that reads the revision, then writes without checking it again,
    under a lock that only this process's threads share: atomic within one process,
    racy across processes (threaded stress passes it, the kill storm must not)."""

    gap = 0.001
    """Seconds between the read and the write: a round trip to a server."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.lock = threading.Lock()

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        del durable  # every write is kept the same way
        check_swap(key, expected_revision, record)
        with self.lock:
            row = self.db.execute("SELECT revision FROM c WHERE key = ?", (key,)).fetchone()
            if row is None or row[0] != expected_revision:
                return False
            if self.gap:
                time.sleep(self.gap)  # a round trip between the read and the write
            sql = "UPDATE c SET revision = ?, record = ? WHERE key = ?"
            self.db.execute(sql, (record.revision, record.to_json(), key))
            return True


class GaplessProcessLocalStore(ProcessLocalStore):
    """Broken as ProcessLocalStore, with nothing between the read and the write but
    SQLite's own work: the narrowest window this bug has on one file."""

    gap = 0.0


class ThreadLockedFilesStore(JsonFilesStore):
    """Broken: the sound directory of JSON files (tests/contract_stores.py), but every
    operation under a lock of this process only (no lock file): each CAS reads the
    file, compares the revision and renames a new file in, atomic among this process's
    threads and racy across processes. No sleep widens the window. (Each process writes
    its own temporary file, so the only thing broken is the lock.)"""

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            yield

    def _write(self, key: str, record: Checkpoint) -> None:
        temporary = self._path(key).with_suffix(f".{os.getpid()}.tmp")
        row = json.dumps({"key": key, "revision": record.revision, "record": record.to_json()})
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(row)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._path(key))


class ArgvRecordingStore(PlainSQLiteStore):
    """Honest; each process that opens it leaves its command line in a file beside the
    database, so a test can see what other users of the machine could (``ps``)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        with open(f"{path}.argv-{os.getpid()}", "w", encoding="utf-8") as handle:
            handle.write("\0".join(sys.orig_argv))


def process_local_url(argument: str) -> ProcessLocalStore:
    """check-store's storm argument (the JSON of a sqlite URL and its options) opened as
    a ProcessLocalStore on the URL's file: the broken store behind a URL."""
    url = json.loads(argument)["url"]
    return ProcessLocalStore(unquote(urlsplit(url).path))
