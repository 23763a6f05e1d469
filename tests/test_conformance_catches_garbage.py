"""The conformance suite's garbage checks (a test class's ``write_raw`` hook) are shown
catching stores that read stored garbage carelessly: a bare ``json.loads`` in ``get``,
a listing that stops at a broken record, a refusal whose suppressed context holds the
text; a store reading through ``decode_stored`` passes. And ``run_once`` on a garbage
row raises CheckpointError INVALID_CHECKPOINT, not store-unavailable forever."""

from __future__ import annotations

import json
import sqlite3
import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contract_stores import TextDictStore
from tool_execution_checkpoint import (
    Binding,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteStore,
    checkpoint_key,
    run_once,
)
from tool_execution_checkpoint.stores import (
    BrokenRecord,
    Listing,
    RecordSummary,
    check_listing,
    decode_stored,
    listing_line,
)
from tool_execution_checkpoint.testing import OperableStoreConformance
from tool_execution_checkpoint.testing.conformance import GARBAGE_SECRET, leaks

GET = "test_garbage_read_back_is_refused_without_showing_it"
LIST = "test_listings_and_pruning_go_on_past_garbage"


def _write_raw(_suite: Any, store: TextDictStore, key: str, raw: bytes) -> None:
    store._rows[key] = (1, raw.decode("utf-8", "surrogateescape"))


class DecodingStore(TextDictStore):
    """Sound: reads through decode_stored and lists broken records as BrokenRecord."""

    def _decode(self, text: str) -> Any:
        return decode_stored(text)

    def list_records(  # type: ignore[override]  # lists BrokenRecord lines too
        self, listing: Listing
    ) -> list[RecordSummary | BrokenRecord]:
        listing = check_listing(listing)
        found: list[RecordSummary | BrokenRecord] = []
        with self._lock:
            rows = sorted(self._rows.items())
        for key, (_, text) in rows:
            if listing.after_key is not None and key <= listing.after_key:
                continue
            line = listing_line(key, text)
            if listing.admits(line):
                found.append(line)
                if len(found) == listing.limit:
                    break
        return found


class StoppingListStore(DecodingStore):
    """Broken: get is sound, but a listing raises at the first broken record (what every
    store of this package did)."""

    def list_records(self, listing: Listing) -> Any:
        found = super().list_records(listing)
        for line in found:
            if isinstance(line, BrokenRecord):
                raise CheckpointError(line.code, "a stored record is broken")
        return found


class LeakyContextStore(DecodingStore):
    """Broken: refuses garbage with the right code, but raises inside the except block,
    so the suppressed context (a JSONDecodeError) still holds the stored text."""

    def _decode(self, text: str) -> Any:
        try:
            json.loads(text)
        except (ValueError, RecursionError):
            raise CheckpointError(ErrorCode.INVALID_CHECKPOINT, "not JSON") from None
        return decode_stored(text)


def suite_for(make_store: Callable[[], Any]) -> OperableStoreConformance:
    checks = type(
        "Checks",
        (OperableStoreConformance,),
        {"make_store": staticmethod(make_store), "write_raw": _write_raw},
    )
    suite: OperableStoreConformance = checks()
    return suite


def failure(make_store: Callable[[], Any], check: str) -> str | None:
    suite = suite_for(make_store)
    try:
        getattr(suite, check)()
    except (AssertionError, CheckpointError) as error:
        return str(error)
    finally:
        suite.teardown_method()
    return None


def test_a_store_whose_get_is_a_bare_json_loads_is_caught() -> None:
    caught = failure(TextDictStore, GET)
    assert caught is not None
    assert caught.startswith("garbage read back ")  # as a value, or raised another type


def test_a_listing_that_stops_at_a_broken_record_is_caught() -> None:
    assert failure(StoppingListStore, GET) is None  # its get is sound
    assert failure(StoppingListStore, LIST) is not None


def test_a_refusal_whose_suppressed_context_holds_the_text_is_caught() -> None:
    caught = failure(LeakyContextStore, GET)
    assert caught is not None
    assert "shows the stored text in its JSONDecodeError" in caught


def test_a_store_reading_through_decode_stored_passes() -> None:
    assert failure(DecodingStore, GET) is None
    assert failure(DecodingStore, LIST) is None


def test_the_checks_are_skipped_without_the_hook() -> None:
    checks = type("Checks", (OperableStoreConformance,), {"make_store": staticmethod(MemoryStore)})
    with pytest.raises(unittest.SkipTest):
        checks().test_listings_and_pruning_go_on_past_garbage()


# --- run_once on a garbage row ---------------------------------------------------------

BINDING = Binding("ns", f"call-{GARBAGE_SECRET}", "tool", "1", "sha256:0")


def _run(store: Any) -> list[str]:
    ran: list[str] = []
    with pytest.raises(CheckpointError) as caught:
        run_once(store, BINDING, lambda: ran.append("tool"), lambda _payload: None)
    assert caught.value.code is ErrorCode.INVALID_CHECKPOINT
    assert leaks(caught.value) is None
    return ran


@pytest.mark.parametrize("raw", [b"null", b"\xff\xfe" + GARBAGE_SECRET.encode(), b"[1]"])
def test_run_once_on_a_garbage_sqlite_row_raises_invalid_checkpoint(
    tmp_path: Path, raw: bytes
) -> None:
    """Not store-unavailable: no retry mends the row, and an operator must see it. The
    tool does not run and the row is left as it was."""
    path = tmp_path / "store.db"
    with SQLiteStore(path) as store:
        with sqlite3.connect(path) as db:
            db.execute(
                "INSERT INTO tec_checkpoint VALUES"
                " (?, 1, 'ready', 'ns', 'c', '1970-01-01T00:00:00Z', 0, CAST(? AS TEXT))",
                (checkpoint_key(BINDING), raw),
            )
        assert _run(store) == []
        with sqlite3.connect(path) as db:
            [(kept,)] = db.execute("SELECT CAST(record AS BLOB) FROM tec_checkpoint").fetchall()
        assert kept == raw


def test_run_once_on_a_garbage_memory_record_raises_invalid_checkpoint() -> None:
    store = MemoryStore()
    store._texts[checkpoint_key(BINDING)] = "null"
    store._revisions[checkpoint_key(BINDING)] = 1
    assert _run(store) == []
