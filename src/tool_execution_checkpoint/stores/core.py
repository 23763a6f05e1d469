"""The storage contract as code: what a checkpoint store must offer, and its keys.

A store keeps one record per key and offers three operations, each atomic and durable
once it reports success:

- ``create_if_absent(key, record)``: insert ``record`` only if nothing is stored under
  ``key``; return whether it inserted. Never overwrite.
- ``get(key)``: the stored record as the JSON mapping that was written, or ``None``.
  The stores of this package return a :class:`StoredRecord`: that mapping, read-only,
  with the record it validated as, which the transitions take without validating it
  again. A store of another package may return any mapping; it is validated in full.
- ``compare_and_swap(key, expected_revision, record, *, durable=True)``: replace the
  stored record with ``record`` only if the stored revision still equals
  ``expected_revision``; return whether it did. One atomic step: never a read followed by
  a separate write. The host passes the table's durability of the step it writes: a
  store may report a ``durable=False`` swap's success before it is flushed (a store crash
  may then lose it, leaving the record as it was), and must treat ``durable=True`` as
  every other write. It is a compare-and-swap either way.
- Optionally, ``post_compare_and_swap(key, expected_revision, record)``
  (:class:`PostingStore`): send a ``durable=False`` swap without waiting for its answer
  and return None, or return whether it landed where the store waited (one that keeps the
  write durable waits). A posted swap may land or be lost, as a crash may lose an
  acknowledged non-durable one; the runner posts the delivered mark where it can.

A write that raises may or may not have been applied. The caller must not guess: it
reads the record back and decides again. Because every next record carries the
writer's own attempt id or delivery id, reading back tells exactly whether it landed.
Stores say so explicitly by raising :class:`OutcomeUnknownError`.

The row codec. Every store of this package keeps a record as its compact JSON text
(:func:`encode_create`, :func:`encode_swap`), indexed by fields of its own, and reads it
back through one decoder, :func:`decode_stored`; :func:`listing_line` makes a listing's
line of it.

Bad stored data. A stored value that :func:`decode_stored` refuses (not UTF-8, not JSON,
nested too deep, an integer past Python's digit limit, a JSON array, string, number or
``null``, or an object that does not validate as a record) is CheckpointError
INVALID_CHECKPOINT naming no value, with no exception chained or in its context. ``get``
returns None only when nothing at all is stored under the key. A listing never stops at
such a record and never drops it: it lists it as a :class:`BrokenRecord` in key order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, NamedTuple, Protocol, Self, runtime_checkable

from ..errors import CheckpointError, ErrorCode
from ..records import Binding, Checkpoint, StoredRecord, stored_record
from ..table import TABLE
from ..validation import check_identifier
from .listing import BrokenRecord, Listing, RecordSummary, check_listing

__all__ = [
    "AsyncCheckpointStore",
    "BrokenRecord",
    "CheckpointStore",
    "ClosableStore",
    "EncodedRecord",
    "Listing",
    "OperableCheckpointStore",
    "OutcomeUnknownError",
    "PostingStore",
    "RecordSummary",
    "StoreConfigurationError",
    "StoreError",
    "StoreNotAppliedError",
    "StoreUnavailableError",
    "StoredRecord",
    "check_create",
    "check_key",
    "check_listing",
    "check_swap",
    "checkpoint_key",
    "decode_stored",
    "encode_create",
    "encode_swap",
    "listing_line",
]

KEY_SCHEME = "tool-execution-checkpoint/key/v1"

_CEILING = TABLE.limits.ceiling_max_payload_bytes


class StoreError(Exception):
    """A store operation failed. For a write, whether it was applied is unknown unless
    the error says so: read back before doing anything else.

    Every error the library's stores raise is in exactly one of four categories, each a
    subclass of this one, and each store's own classes list the store's base class first
    and the category second (``class SQLiteBusyError(SQLiteStoreError,
    StoreUnavailableError)``), so a host catches a category across stores and a store's
    errors by their base:

    - :class:`StoreNotAppliedError`: it failed and changed nothing;
    - :class:`StoreUnavailableError` (a StoreNotAppliedError): the store cannot be reached
      or used just now; retry later;
    - :class:`StoreConfigurationError` (a StoreNotAppliedError): the store is set up
      wrongly; retrying does not help until what the message names is fixed;
    - :class:`OutcomeUnknownError`: a write may or may not have been applied.

    A plain StoreError (from a store outside the library) says nothing more than that."""


class StoreNotAppliedError(StoreError):
    """The operation failed and changed nothing: a write that raises this was not
    applied, so it may be sent again as it is."""


class StoreUnavailableError(StoreNotAppliedError):
    """The store cannot be reached or used just now: down, not answering in time,
    locked by another writer, still loading, or out of connections. Nothing was
    applied; the same operation may succeed later."""


class StoreConfigurationError(StoreNotAppliedError):
    """The store is set up wrongly: a path, URL, credential, permission, server setting
    or schema it cannot work with. Nothing was applied; retrying does not help until
    what the message names is fixed."""


class OutcomeUnknownError(StoreError):
    """A write was sent but its outcome is unknown (for example the connection dropped
    while the transaction committed). Read the record back: it is either at the old
    revision or at the new one, never in between."""


@runtime_checkable
class CheckpointStore(Protocol):
    """A synchronous checkpoint store. See the module docstring for the contract."""

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if nothing is stored there; return whether it
        inserted."""
        ...

    def get(self, key: str) -> Mapping[str, Any] | None:
        """Return the stored record's JSON mapping (a :class:`StoredRecord` from the
        stores of this package), or None if nothing is stored under ``key``; raise
        CheckpointError INVALID_CHECKPOINT (or UNSUPPORTED_SCHEMA) when what is stored is
        not a valid record (see :func:`decode_stored`)."""
        ...

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        """Atomically replace the record under ``key`` with ``record`` if its stored
        revision equals ``expected_revision``; return whether it did. With
        ``durable=False`` the store may report success before the write is flushed."""
        ...


@runtime_checkable
class PostingStore(Protocol):
    """A store that can send a non-durable swap unanswered (the module docstring's
    optional operation; an asyncio store's is a coroutine)."""

    def post_compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint
    ) -> bool | None:
        """Send a ``durable=False`` compare-and-swap: None once sent unanswered, else
        whether it landed. Raising, it may or may not have been sent."""
        ...


@runtime_checkable
class OperableCheckpointStore(CheckpointStore, Protocol):
    """A store that can also list records for operators, and tell their ages on its own
    clock. Every store of this package is one.

    **The store's clock.** A record's ``updatedAt`` comes from its writer's clock, which
    may be hours or days off. A store with a clock of its own (a database server:
    PostgreSQL's ``statement_timestamp()``, Redis's ``TIME``) notes the time of every write on that
    clock, whatever the record says; a store on one host without one (in memory, a
    SQLite file) takes the record's ``updatedAt``, which its writers stamp with that
    host's clock. Listings filter on that time (:attr:`RecordSummary.written_us`) and
    :meth:`clock_us` tells the time now on the same clock, so a record's age is
    ``clock_us() - written_us``, whoever wrote it and whatever their clock said."""

    def clock_us(self) -> int:
        """The time now on the store's clock, in microseconds since the Unix epoch."""
        ...

    def written_us(self, key: str) -> int | None:
        """When the store last wrote the record under ``key``, on its clock (the
        ``written_us`` a listing shows for it); None when nothing is stored under
        ``key``, or when what is stored is not a valid record and the store keeps no
        time apart from it."""
        ...

    def list_records(self, listing: Listing) -> Sequence[RecordSummary | BrokenRecord]:
        """The records ``listing`` selects (see :class:`Listing`): those in any of its
        statuses last written before its time bound on the store's clock, in key order
        after its cursor, at most its limit of them. Page with ``listing.after(key)``,
        the last key of the page before. The records a minimum age ``A`` old are those
        written before ``clock_us() - A``.

        A stored value that is not a valid record is listed as a :class:`BrokenRecord`
        (it counts towards the limit) wherever the store's index puts it: a store that
        indexes status and time apart from the record lists it in the listings that index
        matches, a store without such an index in every listing. It never stops the
        listing.

        Raises CheckpointError INVALID_ARGUMENT (field ``listing``) for anything that is
        not a :class:`Listing` (see :func:`check_listing`)."""
        ...


@runtime_checkable
class ClosableStore(OperableCheckpointStore, Protocol):
    """An operable store that holds what it opened (a file, a pool, a client):
    ``close()`` releases it, and ``with store:`` closes the store at the block's end.
    Every store of this package is one, and :func:`~.opening.open_store` returns one."""

    def close(self) -> None:
        """Release what the store holds; idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
        /,
    ) -> None: ...


@runtime_checkable
class AsyncCheckpointStore(Protocol):
    """The asyncio twin of :class:`CheckpointStore`, with the same contract."""

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if nothing is stored there; return whether it
        inserted."""
        ...

    async def get(self, key: str) -> Mapping[str, Any] | None:
        """Return the stored record's JSON mapping (a :class:`StoredRecord` from the
        stores of this package), or None if there is none."""
        ...

    async def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        """Atomically replace the record under ``key`` with ``record`` if its stored
        revision equals ``expected_revision``; return whether it did. With
        ``durable=False`` the store may report success before the write is flushed."""
        ...


def checkpoint_key(binding: Binding) -> str:
    """Return the store key of the checkpoint for ``binding``.

    The key is derived from the call's identity, ``namespace`` and ``call_id``: each is
    length-prefixed and the whole is hashed with SHA-256, so no two different pairs share
    a key (``("a:b", "c")`` and ``("a", "b:c")`` differ) and keys have a fixed length.

    The tool name, tool revision and input fingerprint are deliberately not in the key:
    they are checked against the stored record by ``decide_checkpoint``. Were they in the
    key, a call replayed with changed input or an upgraded tool would find no record and
    run the tool again; with this key it finds the old record and gets BINDING_CONFLICT.
    """
    if type(binding) is not Binding:
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be a Binding", field="binding")
    digest = hashlib.sha256()
    for part in (KEY_SCHEME, binding.namespace, binding.call_id):
        encoded = part.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
    return f"tec1-{digest.hexdigest()}"


def check_key(key: object) -> str:
    """Return ``key`` if it is a valid store key (an identifier: 1 to 256 characters, no
    control characters); raise INVALID_ARGUMENT otherwise."""
    return check_identifier(key, "key", ErrorCode.INVALID_ARGUMENT)


def check_create(key: object, record: object) -> Checkpoint:
    """Check the arguments of ``create_if_absent``: a valid key and a new record (a
    Checkpoint at the initial revision). Every store calls this before writing."""
    check_key(key)
    if type(record) is not Checkpoint:
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be a Checkpoint", field="record")
    if record.revision != TABLE.initial_revision:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            f"a created record must be at revision {TABLE.initial_revision}",
            field="record.revision",
        )
    return record


def check_swap(key: object, expected_revision: object, record: object) -> Checkpoint:
    """Check the arguments of ``compare_and_swap``: a valid key and a Checkpoint whose
    revision is exactly ``expected_revision + 1``. Every store calls this before
    writing."""
    check_key(key)
    if type(record) is not Checkpoint:
        raise CheckpointError(ErrorCode.INVALID_ARGUMENT, "must be a Checkpoint", field="record")
    if type(expected_revision) is not int or record.revision != expected_revision + 1:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "the next record's revision must be expected_revision + 1",
            field="expected_revision",
        )
    return record


# --- the row codec: a record to what a store keeps, and back ------------------------------


class EncodedRecord(NamedTuple):
    """A record checked for a write, and what a store keeps of it (see
    :func:`encode_create` and :func:`encode_swap`)."""

    record: Checkpoint
    """The record, checked."""
    text: str
    """Its compact JSON text (:meth:`Checkpoint.to_json`): what every store of this
    package keeps for it, as text or as its UTF-8 bytes, and what :func:`decode_stored`
    reads back."""

    @property
    def updated_us(self) -> int:
        """The record's ``updatedAt`` in microseconds since the Unix epoch (the number
        :func:`~tool_execution_checkpoint.validation.timestamp_microseconds` gives): the
        time a store on its writers' clock indexes it by."""
        return _checked_us(self.record.updated_at)


def encode_create(key: object, record: object) -> EncodedRecord:
    """Check the arguments of ``create_if_absent`` (:func:`check_create`) and encode the
    record; raise what :func:`check_create` raises."""
    checked = check_create(key, record)
    return EncodedRecord(checked, checked.to_json())


def encode_swap(key: object, expected_revision: object, record: object) -> EncodedRecord:
    """Check the arguments of ``compare_and_swap`` (:func:`check_swap`) and encode the
    record; raise what :func:`check_swap` raises."""
    checked = check_swap(key, expected_revision, record)
    return EncodedRecord(checked, checked.to_json())


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_from_iso = datetime.fromisoformat


def _checked_us(timestamp: str) -> int:
    """``timestamp_microseconds`` of a record's timestamp, without checking its text
    again: a Checkpoint checked every timestamp against the RFC 3339 profile when it was
    built, and every text of the profile is one ``datetime.fromisoformat`` reads (the
    tests hold the two equal)."""
    return (_from_iso(timestamp) - _EPOCH) // _MICROSECOND


_UNREADABLE: Any = object()


def _parse(raw: object) -> Any:
    """The JSON value of ``raw`` (str, or bytes that must be UTF-8), or _UNREADABLE.
    Never raises: an error raised in an ``except`` block would keep the text in its
    context (a JSONDecodeError's ``doc``, a UnicodeDecodeError's ``object``)."""
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return _UNREADABLE
    if not isinstance(raw, str):
        return _UNREADABLE
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, too deep, an int past the digit limit
        return _UNREADABLE


def _validate(value: dict[str, Any]) -> Checkpoint | CheckpointError:
    """The validated record, or the (fresh, context-free) refusal of it."""
    try:
        return Checkpoint.from_dict(value, max_payload_bytes=_CEILING)
    except CheckpointError as error:
        if error.code is ErrorCode.UNSUPPORTED_SCHEMA:  # a newer library wrote it
            return CheckpointError(error.code, error.detail, field=error.field)
        # PAYLOAD_NOT_JSON or PAYLOAD_LIMIT_EXCEEDED at the ceiling are broken records too.
        return CheckpointError(
            ErrorCode.INVALID_CHECKPOINT, error.detail, field=error.field, limit=error.limit
        )
    except (ValueError, TypeError, RecursionError, OverflowError):  # pragma: no cover
        # Nothing found raises these for a JSON object; kept so no stored value can.
        return CheckpointError(ErrorCode.INVALID_CHECKPOINT, "the stored record is unreadable")


def decode_stored(raw: str | bytes) -> StoredRecord:
    """Decode and validate the text (or UTF-8 bytes) a store kept for a record: the one
    decoder every store of this package reads records with, in ``get`` and in listings.

    The answer is the JSON object exactly as it was stored, a fresh read-only mapping
    (what ``get`` returns), with the record it validated as in its ``checkpoint``: the
    transitions take that one instead of validating the record again.

    Raises:
        CheckpointError: INVALID_CHECKPOINT for anything that is not a valid record:
            bytes that are not UTF-8, text that is not JSON, nested too deep for the
            parser, an integer past Python's digit limit, a JSON array, string, number or
            ``null``, and an object that does not validate as a record (with the largest
            payload limit; a payload rule it breaks is INVALID_CHECKPOINT here too).
            UNSUPPORTED_SCHEMA for a record of another schema version. The message
            names a field and a rule, never a value, and the error has no
            ``__cause__`` and no ``__context__`` of its own (nothing in the chain holds
            the stored text).
    """
    value = _parse(raw)
    if type(value) is not dict:
        raise CheckpointError(
            ErrorCode.INVALID_CHECKPOINT, "the stored value is not the JSON text of an object"
        )
    checked = _validate(value)
    if isinstance(checked, CheckpointError):
        raise checked
    return stored_record(value, checked)


def listing_line(
    key: str, raw: str | bytes, *, written_us: int | None = None
) -> RecordSummary | BrokenRecord:
    """The listing line of the text (or UTF-8 bytes) a store kept under ``key``: its
    :class:`RecordSummary` (last written at ``written_us`` on the store's clock; None: at
    the record's own ``updatedAt``), or a :class:`BrokenRecord` when
    :func:`decode_stored` refuses it. Never raises for what is stored."""
    try:
        return RecordSummary.of(key, decode_stored(raw).checkpoint, written_us=written_us)
    except CheckpointError as error:
        return BrokenRecord.of(key, error)
