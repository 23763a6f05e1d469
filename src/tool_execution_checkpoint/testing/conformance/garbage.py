"""Garbage in storage: stored values that are not valid records, and the check that no
refusal of one shows it (see :class:`~tool_execution_checkpoint.testing.StoreConformance`,
whose ``write_raw`` hook stores them)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from ...errors import CheckpointError, ErrorCode
from ...records import Binding, Checkpoint, Execution, Result
from ...stores.core import StoreError
from ...table import Status

__all__ = ["GARBAGE_EXAMPLES", "GARBAGE_SECRET", "check_refusal", "garbage_values", "leaks"]

GARBAGE_SECRET = "s3cr3t-garbage-7f1c"
"""A marker every generated garbage value holds, that no error may show."""

NOW = "2026-01-01T00:00:00Z"


def _valid_record_text() -> str:
    """A completed record's text, built with the record constructors alone: it is made
    when the module is imported, which must not run the transitions (the explorer's
    mutants break them, and import this package)."""
    binding = Binding("conformance", f"call-{GARBAGE_SECRET}", "tool", "1", "sha256:0")
    done = Checkpoint(
        revision=3,
        status=Status.COMPLETED,
        binding=binding,
        created_at=NOW,
        updated_at=NOW,
        execution=Execution("a", NOW),
        result=Result([GARBAGE_SECRET], completed_at=NOW),
    )
    return done.to_json()


def _broken_record(field: str, value: object) -> bytes:
    """A valid record's JSON with one top-level field replaced by ``value``."""
    record = json.loads(_valid_record_text())
    record[field] = value
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_FIELDS = st.sampled_from(list(json.loads(_valid_record_text())))
"""A record's top-level fields, in their persisted order."""


_SECRET_BYTES = GARBAGE_SECRET.encode()
_TEXT = _valid_record_text().encode()

GARBAGE_EXAMPLES: tuple[bytes, ...] = (
    b"null",
    b"[" * 100_000 + _SECRET_BYTES + b"]" * 100_000,  # deeper than the parser goes
    b'{"a":' * 50_000 + b'"' + _SECRET_BYTES + b'"' + b"}" * 50_000,
    b"[" + b"9" * 5_000 + b', "' + _SECRET_BYTES + b'"]',  # past the digit limit
    b'["' + _SECRET_BYTES + b'"]',
    b'"' + _SECRET_BYTES + b'"',
    b"12345" + _SECRET_BYTES,
    _TEXT.replace(b'"status":"completed"', b'"status":"' + _SECRET_BYTES + b'"'),
    _TEXT.replace(b'"schemaVersion":1', b'"schemaVersion":1,"' + _SECRET_BYTES + b'":1'),
    _TEXT[:-1] + b',"extra":"' + _SECRET_BYTES + b'"}',
    _broken_record("result", {"payload": _SECRET_BYTES.decode(), "completedAt": NOW}),
    _TEXT.replace(b'["' + _SECRET_BYTES + b'"]', b'["' + _SECRET_BYTES + b'\\ud800"]'),
    _TEXT.replace(b'["' + _SECRET_BYTES + b'"]', b'["' + _SECRET_BYTES + b'", NaN]'),
)
"""The fixed garbage values: each one is read back in every run of the check."""


def garbage_values() -> st.SearchStrategy[bytes]:
    """Stored values that are not valid records, each holding :data:`GARBAGE_SECRET`."""
    secret = GARBAGE_SECRET.encode()
    text = _valid_record_text().encode()
    return st.one_of(
        st.binary(max_size=64).map(lambda raw: raw + secret),  # mostly not JSON
        st.binary(min_size=1, max_size=16).map(lambda raw: secret + b"\xff\xfe" + raw),
        st.integers(1, len(text) - 1).map(lambda cut: text[:cut]),  # a torn write
        st.sampled_from(GARBAGE_EXAMPLES),
        st.tuples(_FIELDS, _JSON_VALUES).map(
            lambda pair: _broken_record(pair[0], [GARBAGE_SECRET, pair[1]])
        ),
    )


def leaks(error: BaseException, secret: str = GARBAGE_SECRET) -> str | None:
    """Where ``secret`` shows in ``error``'s chain (message, repr, args, attributes,
    ``__cause__`` and ``__context__``, suppressed or not), or None if nowhere."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        name = type(current).__name__
        shown = {"str": str(current), "repr": repr(current)}
        shown |= {f"args[{i}]": repr(arg) for i, arg in enumerate(current.args)}
        shown |= {f".{key}": repr(value) for key, value in vars(current).items()}
        for where, text in shown.items():
            if secret in text:
                return f"{name} {where}"
        pending += [link for link in (current.__cause__, current.__context__) if link]
    return None


def check_refusal(error: BaseException) -> None:
    """A garbage read must be refused as INVALID_CHECKPOINT or UNSUPPORTED_SCHEMA, or be
    a StoreError; the chain must not hold the garbage's text."""
    if isinstance(error, CheckpointError):
        allowed = (ErrorCode.INVALID_CHECKPOINT, ErrorCode.UNSUPPORTED_SCHEMA)
        assert error.code in allowed, f"garbage read back as {error.code}"
    elif not isinstance(error, StoreError):
        raise AssertionError(
            f"garbage read back raised {type(error).__name__}, not CheckpointError"
        ) from None
    where = leaks(error)
    assert where is None, f"the error of a garbage read shows the stored text in its {where}"
