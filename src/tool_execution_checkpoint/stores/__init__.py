"""The stores: one contract core, and the stores built on it.

- :mod:`.core`: the storage contract as code (the protocols, the one row codec: a
  record to the text a store keeps and back, and its listing line; the argument and
  listing checks every store applies, and the error taxonomy every
  store's errors subclass). Everything below is held to it by
  :mod:`tool_execution_checkpoint.testing`.
- :mod:`.memory`: :class:`MemoryStore`, the in-process model every store is checked
  against (not durable), and its asyncio face :class:`AsyncMemoryStore`.
- :mod:`.sqlite`: :class:`SQLiteStore`, the embedded default, and
  :class:`AsyncSQLiteStore`.
- :mod:`.threaded`: :class:`~.threaded.ThreadedStore`, the one bridge that gives a
  synchronous store its asyncio face (each store's operations on a worker thread of its
  own): the two async stores above are built on it.
- :mod:`.postgres` and :mod:`.redis`: the stores for a fleet, behind the ``postgres`` and
  ``redis`` extras; import them by module, so that psycopg and redis-py stay optional.
- :mod:`.opening`: :func:`open_store`, which opens the store a URL names. (The scratch
  spaces ``check-store`` makes inside a URL's target are test tools:
  :mod:`tool_execution_checkpoint.testing.scratch`.)

This package re-exports the core, the two stores without extras and the opener.
"""

from .core import (
    AsyncCheckpointStore,
    BrokenRecord,
    CheckpointStore,
    ClosableStore,
    EncodedRecord,
    Listing,
    OperableCheckpointStore,
    OutcomeUnknownError,
    RecordSummary,
    StoreConfigurationError,
    StoredRecord,
    StoreError,
    StoreNotAppliedError,
    StoreUnavailableError,
    check_create,
    check_key,
    check_listing,
    check_swap,
    checkpoint_key,
    decode_stored,
    encode_create,
    encode_swap,
    listing_line,
)
from .memory import AsyncMemoryStore, MemoryStore
from .opening import (
    StoreScheme,
    is_store_url,
    open_store,
    register_store,
    store_options,
    url_scheme,
)
from .sqlite import (
    AsyncSQLiteStore,
    SQLiteBusyError,
    SQLiteConfigurationError,
    SQLiteNotAppliedError,
    SQLiteOutcomeUnknownError,
    SQLiteStore,
    SQLiteStoreError,
)

__all__ = [
    "AsyncCheckpointStore",
    "AsyncMemoryStore",
    "AsyncSQLiteStore",
    "BrokenRecord",
    "CheckpointStore",
    "ClosableStore",
    "EncodedRecord",
    "Listing",
    "MemoryStore",
    "OperableCheckpointStore",
    "OutcomeUnknownError",
    "RecordSummary",
    "SQLiteBusyError",
    "SQLiteConfigurationError",
    "SQLiteNotAppliedError",
    "SQLiteOutcomeUnknownError",
    "SQLiteStore",
    "SQLiteStoreError",
    "StoreConfigurationError",
    "StoreError",
    "StoreNotAppliedError",
    "StoreScheme",
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
    "is_store_url",
    "listing_line",
    "open_store",
    "register_store",
    "store_options",
    "url_scheme",
]
