"""The conformance suite, in its default profile, is shown catching custom stores with the
bugs real adapter authors write (tests/contract_stores.py), and passing sound custom
stores: each broken store fails the check named for it, with a message that says what
broke, and the store-contract state machine alone catches each store-level bug too."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from contract_stores import (
    DeletingPruneStore,
    DoubleNumbersStore,
    DroppingUtf8Store,
    DuckListingStore,
    InclusiveCursorStore,
    Int64BoundStore,
    JsonFilesStore,
    KeyPrefixStore,
    LongKeyPrefixStore,
    QuotingKeyStore,
    ScanThenFilterStore,
    SinglePrecisionStore,
    SuppressedContextStore,
    SweepingStore,
    ThreeByteUtf8Store,
    TruncatingStore,
)
from test_conformance_catches_garbage import DecodingStore
from tool_execution_checkpoint.testing import PROFILES, OperableStoreConformance
from tool_execution_checkpoint.testing.contract import (
    canonical_json,
    ceiling_payload,
    contract_machine,
    difference,
    prefix_sharing_keys,
)

DEFAULT = PROFILES["default"]


@pytest.fixture(autouse=True)
def _default_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_CHECKPOINT_HARNESS", "default")


def suite_for(make_store: Callable[[], Any]) -> OperableStoreConformance:
    """An instance of the suite as ``check-store`` builds one, for ``make_store``."""
    checks = type("Checks", (OperableStoreConformance,), {"make_store": staticmethod(make_store)})
    suite: OperableStoreConformance = checks()
    return suite


def fails(make_store: Callable[[], Any], check: str) -> str:
    """Run one check of the default profile on ``make_store``; return its failure. The
    state machine runs with the default profile's budget without shrinking (finding the
    bug is the claim; shrinking only makes the report readable)."""
    suite = suite_for(make_store)
    try:
        if check == "test_store_contract_machine":
            run_state_machine_as_test(
                contract_machine(suite._store, operable=True),
                settings=settings(
                    max_examples=DEFAULT.contract_examples,
                    stateful_step_count=DEFAULT.contract_steps,
                    phases=[Phase.generate],
                    derandomize=True,
                    database=None,
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                ),
            )
        else:
            getattr(suite, check)()
    except (AssertionError, ValueError) as error:
        return str(error)
    finally:
        suite.teardown_method()
    raise AssertionError(f"{check} passed a broken store")


# bug -> (the broken store, the check that catches it, what its message says)
CAUGHT: dict[str, tuple[Callable[[], Any], str, str]] = {
    "floats kept in single precision": (
        SinglePrecisionStore,
        "test_edge_values_read_back_exactly",
        "a float came back in single precision",
    ),
    "every number a double": (
        DoubleNumbersStore,
        "test_edge_values_read_back_exactly",
        r"an integer came back with another value \(digits lost\)",
    ),
    "3-byte UTF-8 text column (mangled)": (
        ThreeByteUtf8Store,
        "test_edge_values_read_back_exactly",
        "a string lost its characters outside the BMP",
    ),
    "3-byte UTF-8 text column (dropped)": (
        DroppingUtf8Store,
        "test_edge_values_read_back_exactly",
        "a string lost its characters outside the BMP",
    ),
    "record column truncates large records": (
        TruncatingStore,
        "test_payloads_at_the_ceiling_read_back_whole",
        "Unterminated string|Expecting|truncated",
    ),
    "key column keeps 64 characters": (
        KeyPrefixStore,
        "test_keys_sharing_long_prefixes_name_different_records",
        "keys sharing a long prefix share a record",
    ),
    "key column keeps 255 characters": (
        LongKeyPrefixStore,
        "test_keys_sharing_long_prefixes_name_different_records",
        "keys sharing a long prefix share a record",
    ),
    "listing scans a page, then filters": (
        ScanThenFilterStore,
        "test_every_listing_filter_pages_like_the_model",
        r"a page held \d+ records while \d+ matched",
    ),
    "listing cursor is inclusive": (
        InclusiveCursorStore,
        "test_every_listing_filter_pages_like_the_model",
        "a record was listed on two pages",
    ),
    "listing refuses the lowest age bound, bound minus one past 64 bits": (
        Int64BoundStore,
        "test_any_listing_query_answers_like_the_model",
        r"list_records answered \(<ErrorCode.INVALID_ARGUMENT",
    ),
    "listing takes a look-alike for a Listing": (
        DuckListingStore,
        "test_list_records_refuses_what_is_not_a_listing",
        "list_records took a SimpleNamespace that is not a Listing",
    ),
    "a refused key quoted in the message": (
        QuotingKeyStore,
        "test_refusals_never_show_what_was_passed",
        r"a refusal shows what was passed, in CheckpointError str",
    ),
    "a refused key kept in a suppressed context": (
        SuppressedContextStore,
        "test_refusals_never_show_what_was_passed",
        r"a refusal shows what was passed, in LookupError",
    ),
    "prune deletes the delivered record": (
        DeletingPruneStore,
        "test_store_contract_machine",
        "a delivered record \\(a tombstone\\) was lost|lost the record",
    ),
    "tombstones swept by a later write": (
        SweepingStore,
        "test_store_contract_machine",
        "a delivered record \\(a tombstone\\) was lost|lost the record|a page"
        "|lacks \\d+ records the model lists",
    ),
}


@pytest.mark.parametrize("bug", sorted(CAUGHT))
def test_the_default_profile_catches_it(bug: str) -> None:
    make_store, check, message = CAUGHT[bug]
    failure = fails(make_store, check)
    assert re.search(message, failure), failure


MACHINE_CATCHES = {
    "floats kept in single precision": SinglePrecisionStore,
    "every number a double": DoubleNumbersStore,
    "3-byte UTF-8 text column": ThreeByteUtf8Store,
    "record column truncates large records": TruncatingStore,
    "key column keeps 64 characters": KeyPrefixStore,
    "key column keeps 255 characters": LongKeyPrefixStore,
    "listing scans a page, then filters": ScanThenFilterStore,
    "listing cursor is inclusive": InclusiveCursorStore,
    "prune deletes the delivered record": DeletingPruneStore,
}


@pytest.mark.parametrize("bug", sorted(MACHINE_CATCHES))
def test_the_contract_machine_alone_catches_it(bug: str) -> None:
    fails(MACHINE_CATCHES[bug], "test_store_contract_machine")


class TestTextDictStore(OperableStoreConformance):
    """Sound: a dict that re-parses the stored text through decode_stored passes every
    check, the garbage checks included."""

    def make_store(self) -> DecodingStore:
        return DecodingStore()

    def write_raw(self, store: DecodingStore, key: str, raw: bytes) -> None:
        """The text of the row (bad UTF-8 as surrogates), at revision 1."""
        store._rows[key] = (1, raw.decode("utf-8", "surrogateescape"))


class TestJsonFilesStore(OperableStoreConformance):
    """Sound: a directory of JSON files under a lock passes every check."""

    harness_examples = 50  # every write is an fsync and a rename

    @pytest.fixture(autouse=True)
    def _directory(self, tmp_path: Path) -> None:
        self.directory = tmp_path
        self.made = 0

    def make_store(self) -> JsonFilesStore:
        self.made += 1
        return JsonFilesStore(self.directory / f"store-{self.made}")

    def write_raw(self, store: JsonFilesStore, key: str, raw: bytes) -> None:
        """The record field of the key's file (bad UTF-8 as surrogates), at revision 1."""
        text = raw.decode("utf-8", "surrogateescape")
        row = json.dumps({"key": key, "revision": 1, "record": text})
        store._path(key).write_text(row, encoding="utf-8", errors="surrogateescape")


# --- the comparison and generators themselves -----------------------------------------------


@pytest.mark.parametrize(
    ("written", "read", "kind"),
    [
        (-0.0, 0.0, "another sign"),
        (1, 1.0, "a int came back as a float"),
        (True, 1, "a bool came back as a int"),
        (0.1, 0.10000000149011612, "single precision"),
        (2**63 + 1, 2**63, "digits lost"),
        ("\U0001f600", "\ufffd", "outside the BMP"),
        ("abcdef", "abc", "truncated"),
    ],
)
def test_difference_says_what_equality_hides(written: object, read: object, kind: str) -> None:
    assert canonical_json({"p": written}) != canonical_json({"p": read})
    found = difference({"result": {"payload": [written]}}, {"result": {"payload": [read]}})
    assert found is not None
    assert found.startswith("record.result.payload[0]: ")
    assert kind in found


def test_difference_never_shows_a_value() -> None:
    secret = "s3cret-\U0001f600"
    found = difference(
        {"result": {"payload": {secret: secret}}}, {"result": {"payload": {secret: "x"}}}
    )
    assert found is not None
    assert "s3cret" not in found
    assert difference({"a": [1, -0.0]}, {"a": [1, -0.0]}) is None


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_ceiling_payloads_have_the_size_to_the_byte(width: int) -> None:
    for size in (12, 13, 14, 15, 65_536):
        text = canonical_json(ceiling_payload(size, width))
        assert len(text.encode("utf-8")) == size
    with pytest.raises(ValueError, match="at least 12"):
        ceiling_payload(11)


def test_prefix_sharing_keys_are_valid_distinct_and_share_their_prefix() -> None:
    for length, group in zip(
        (8, 32, 63, 64, 65, 128, 200, 254, 255), prefix_sharing_keys(), strict=True
    ):
        assert len(set(group)) == len(group) >= 4
        assert all(key[:length] == group[0][:length] and len(key) <= 256 for key in group)
        assert len({key[: length + 1] for key in group}) == len(group) - (length <= 254)
