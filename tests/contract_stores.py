"""Custom stores written from scratch against the public store protocol, as a user would:
two sound ones, and broken ones each with one realistic bug the conformance suite must
catch within its default profile (tests/test_conformance_catches_bugs.py)."""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tool_execution_checkpoint import Checkpoint, CheckpointError, ErrorCode, Status
from tool_execution_checkpoint.stores import (
    BrokenRecord,
    Listing,
    RecordSummary,
    check_create,
    check_key,
    check_listing,
    check_swap,
    decode_stored,
)

CEILING = 10_485_760


class TextDictStore:
    """A dict of key -> (revision, JSON text) under a lock; every read parses the stored
    text again. Sound for everything a store writes; its reads are a bare json.loads, so
    the garbage checks catch it (tests/test_conformance_catches_garbage.py, where
    DecodingStore is the sound reader). The hooks below are where the broken stores
    differ."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[int, str]] = {}

    # hooks -------------------------------------------------------------------------------
    def _slot(self, key: str) -> str:
        return key

    def _encode(self, record: Checkpoint) -> str:
        return record.to_json()

    def _decode(self, text: str) -> Any:
        return json.loads(text)

    def _swapped(self, slot: str, record: Checkpoint) -> None:
        self._rows[slot] = (record.revision, self._encode(record))

    # the protocol ------------------------------------------------------------------------
    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        check_create(key, record)
        with self._lock:
            slot = self._slot(key)
            if slot in self._rows:
                return False
            self._rows[slot] = (record.revision, self._encode(record))
            return True

    def get(self, key: str) -> Mapping[str, Any] | None:
        check_key(key)
        with self._lock:
            row = self._rows.get(self._slot(key))
        return None if row is None else self._decode(row[1])

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        del durable  # every write is kept the same way
        check_swap(key, expected_revision, record)
        with self._lock:
            slot = self._slot(key)
            row = self._rows.get(slot)
            if row is None or row[0] != expected_revision:
                return False
            self._swapped(slot, record)
            return True

    def _matches(self, listing: Listing) -> Iterator[RecordSummary]:
        """The records ``listing`` selects, past its cursor, its limit aside."""
        with self._lock:
            rows = sorted(self._rows.items())
        for key, (_, text) in rows:
            if listing.after_key is not None and key <= listing.after_key:
                continue
            summary = RecordSummary.of(key, Checkpoint.from_json(text, max_payload_bytes=CEILING))
            if listing.admits(summary):
                yield summary

    # the operator's part: the host's clock, records written at their updatedAt ------------
    def clock_us(self) -> int:
        return time.time_ns() // 1_000

    def written_us(self, key: str) -> int | None:
        check_key(key)
        with self._lock:
            row = self._rows.get(self._slot(key))
        if row is None:
            return None
        try:
            return RecordSummary.of(key, decode_stored(row[1]).checkpoint).written_us
        except CheckpointError:
            return None

    def list_records(self, listing: Listing) -> list[RecordSummary]:
        listing = check_listing(listing)
        return list(itertools.islice(self._matches(listing), listing.limit))


class JsonFilesStore:
    """Sound: a directory with one JSON file per key (named by the key's SHA-256), every
    operation under an exclusive lock on a lock file, each write a rename of a fsynced
    temporary file."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._thread_lock = threading.Lock()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock, open(self.directory / "lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _path(self, key: str) -> Path:
        return self.directory / (hashlib.sha256(key.encode()).hexdigest() + ".json")

    def _read(self, key: str) -> dict[str, Any] | None:
        try:
            row: dict[str, Any] = json.loads(self._path(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return row

    def _write(self, key: str, record: Checkpoint) -> None:
        temporary = self._path(key).with_suffix(".tmp")
        row = json.dumps({"key": key, "revision": record.revision, "record": record.to_json()})
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(row)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._path(key))

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        check_create(key, record)
        with self._locked():
            if self._read(key) is not None:
                return False
            self._write(key, record)
            return True

    def get(self, key: str) -> Mapping[str, Any] | None:
        check_key(key)
        with self._locked():
            row = self._read(key)
        return None if row is None else decode_stored(row["record"])

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        del durable  # every write is kept the same way
        check_swap(key, expected_revision, record)
        with self._locked():
            row = self._read(key)
            if row is None or row["revision"] != expected_revision:
                return False
            self._write(key, record)
            return True

    def clock_us(self) -> int:
        return time.time_ns() // 1_000

    def written_us(self, key: str) -> int | None:
        check_key(key)
        with self._locked():
            row = self._read(key)
        if row is None:
            return None
        try:
            return RecordSummary.of(key, decode_stored(row["record"]).checkpoint).written_us
        except CheckpointError:
            return None

    def list_records(self, listing: Listing) -> list[RecordSummary | BrokenRecord]:
        listing = check_listing(listing)
        with self._locked():
            rows = [json.loads(path.read_text("utf-8")) for path in self.directory.glob("*.json")]
        found: list[RecordSummary | BrokenRecord] = []
        for row in sorted(rows, key=lambda row: str(row["key"])):
            key = row["key"]
            if listing.after_key is not None and key <= listing.after_key:
                continue
            line: RecordSummary | BrokenRecord
            try:
                line = RecordSummary.of(key, decode_stored(row["record"]).checkpoint)
            except CheckpointError as error:
                line = BrokenRecord.of(key, error)
            if listing.admits(line):
                found.append(line)
                if len(found) == listing.limit:
                    break
        return found


# --- broken: numbers --------------------------------------------------------------------


class SinglePrecisionStore(TextDictStore):
    """Broken: floats come back in single precision (a REAL column, a float32 field)."""

    def _decode(self, text: str) -> Any:
        def single(digits: str) -> float:
            value = float(digits)
            if abs(value) > 3.4e38:
                return value
            narrowed: float = struct.unpack("f", struct.pack("f", value))[0]
            return narrowed

        return json.loads(text, parse_float=single)


class DoubleNumbersStore(TextDictStore):
    """Broken: every number is kept as a double, as JavaScript would (integers beyond
    2**53 lose digits; small ones read back as before)."""

    def _decode(self, text: str) -> Any:
        return json.loads(text, parse_int=lambda digits: int(float(digits)))


# --- broken: text -----------------------------------------------------------------------


class ThreeByteUtf8Store(TextDictStore):
    """Broken: the text column holds only 3-byte UTF-8 (MySQL's ``utf8``): characters
    outside the BMP are replaced by U+FFFD."""

    def _encode(self, record: Checkpoint) -> str:
        return "".join(char if ord(char) <= 0xFFFF else "\ufffd" for char in record.to_json())


class DroppingUtf8Store(TextDictStore):
    """Broken: characters outside the BMP are silently dropped from the stored text."""

    def _encode(self, record: Checkpoint) -> str:
        return "".join(char for char in record.to_json() if ord(char) <= 0xFFFF)


class TruncatingStore(TextDictStore):
    """Broken: the record column holds 65,535 bytes (a MySQL TEXT), the rest cut off."""

    def _encode(self, record: Checkpoint) -> str:
        return record.to_json().encode("utf-8")[:65_535].decode("utf-8", errors="ignore")


class KeyPrefixStore(TextDictStore):
    """Broken: the key column keeps only the first ``width`` characters (VARCHAR(64))."""

    width = 64

    def _slot(self, key: str) -> str:
        return key[: self.width]


class LongKeyPrefixStore(KeyPrefixStore):
    """Broken: the key column keeps only the first 255 characters."""

    width = 255


# --- broken: listings -------------------------------------------------------------------


class ScanThenFilterStore(TextDictStore):
    """Broken: a listing page scans the next ``limit`` keys and then filters them by
    status and age, so pages come back short or empty while matches remain."""

    def list_records(self, listing: Listing) -> list[RecordSummary]:
        scanned = Listing(list(Status), after_key=listing.after_key, limit=listing.limit)
        return [row for row in super().list_records(scanned) if listing.admits(row)]


class InclusiveCursorStore(TextDictStore):
    """Broken: a page starts at ``after_key`` itself, so a record is on two pages."""

    def list_records(self, listing: Listing) -> list[RecordSummary]:
        listing = check_listing(listing)
        after = listing.after_key
        from_the_first = Listing(listing.statuses, written_before_us=listing.written_before_us)
        found = (row for row in self._matches(from_the_first) if after is None or row.key >= after)
        return list(itertools.islice(found, listing.limit))


class Int64BoundStore(TextDictStore):
    """Broken: lists ``written_us <= bound - 1`` with the bound bound as a BIGINT, so the
    lowest bound a Listing keeps, ``-(2**63)``, is refused as out of range (as a driver
    refuses to bind it) where the contract lists no sound record, as MemoryStore does."""

    def list_records(self, listing: Listing) -> list[RecordSummary]:
        before = listing.written_before_us
        if before is not None and before - 1 < -(2**63):
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT, "out of range", field="written_before_us"
            )
        return super().list_records(listing)


class DuckListingStore(TextDictStore):
    """Broken: reads a listing's fields without asking whether it is a Listing (as a store
    binding them straight into its query would), so whatever has those attributes is
    listed, a limit below 1 meaning no limit."""

    def list_records(self, listing: Listing) -> list[RecordSummary]:
        fields = Listing(listing.statuses, written_before_us=listing.written_before_us)
        found = [row for row in self._matches(fields) if row.key > (listing.after_key or "")]
        return found[: listing.limit] if listing.limit > 0 else found


# --- broken: refusals ------------------------------------------------------------------


class _OwnKeyCheck(TextDictStore):
    """Checks keys itself before the shared checks; :meth:`_refuse` says how."""

    def _refuse(self, key: object) -> None:
        raise NotImplementedError

    def _own_check(self, key: object) -> None:
        try:
            check_key(key)
        except CheckpointError:
            self._refuse(key)

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        self._own_check(key)
        return super().create_if_absent(key, record)

    def get(self, key: str) -> Mapping[str, Any] | None:
        self._own_check(key)
        return super().get(key)

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        self._own_check(key)
        return super().compare_and_swap(key, expected_revision, record, durable=durable)


class QuotingKeyStore(_OwnKeyCheck):
    """Broken: a refused key is quoted in the message (a key holds a call id)."""

    def _refuse(self, key: object) -> None:
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, f"not a key: {key!r}", field="key")


class SuppressedContextStore(_OwnKeyCheck):
    """Broken: the refusal is raised ``from None`` while handling an error that holds
    the key: suppressed, but still the exception's ``__context__``."""

    def _refuse(self, key: object) -> None:
        try:
            raise LookupError(key)
        except LookupError:
            raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "not a key", field="key") from None


# --- broken: tombstones -----------------------------------------------------------------


def _is_tombstone(record: Checkpoint) -> bool:
    return record.result is not None and record.result.pruned_at is not None


class DeletingPruneStore(TextDictStore):
    """Broken: the swap that prunes a delivered record deletes it instead ("nothing
    left to keep"), so a replayed call id finds no record and runs the tool again."""

    def _swapped(self, slot: str, record: Checkpoint) -> None:
        if _is_tombstone(record):
            del self._rows[slot]
        else:
            super()._swapped(slot, record)


class SweepingStore(TextDictStore):
    """Broken: keeps the tombstone when pruning, but the next compare-and-swap on any
    key sweeps tombstones away (a lazy garbage collector)."""

    def _swapped(self, slot: str, record: Checkpoint) -> None:
        for other, (_, text) in list(self._rows.items()):
            if other != slot and '"prunedAt":"' in text:
                del self._rows[other]
        super()._swapped(slot, record)
