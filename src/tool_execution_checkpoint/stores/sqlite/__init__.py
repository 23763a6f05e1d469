"""SQLiteStore: a durable checkpoint store in one SQLite file, standard library only.

::

    from tool_execution_checkpoint.stores.sqlite import SQLiteStore

    store = SQLiteStore("/var/lib/agent/checkpoints.db")   # or SQLiteStore.from_url(...)

The contract: a write that returned True was fsynced to the WAL and survives a crash of
the process or of the machine; each write is one statement, judged by its row count,
never a read then a write. One store may be shared by many threads (its operations run
one at a time), and many processes on one machine may open the same file, each with a
store of its own; a writer that finds the file locked waits up to ``busy_timeout``
seconds. The file must be on a local file system, and a store is not carried across
``fork()``: open it in the child. Its clock is the host's: a record was written at its
``updatedAt`` (see :class:`~tool_execution_checkpoint.stores.OperableCheckpointStore`).
The tables are prefixed ``tec_`` and versioned in ``tec_meta``; a file whose schema is
newer than this library's is refused, never rewritten. Give the store a file of its own.

docs/stores/sqlite.md describes the design and what was measured for it. The modules:

- :mod:`.store`: :class:`SQLiteStore` and :func:`open_url`;
- :mod:`.async_store`: :class:`AsyncSQLiteStore`, the store through the one thread bridge
  (:class:`~tool_execution_checkpoint.stores.threaded.ThreadedStore`);
- :mod:`.errors`: the errors, and the translation of ``sqlite3``'s into them;
- :mod:`.sql`: the tables and every statement, and what their rows mean;
- :mod:`.connection`: opening a file (WAL, durable commits, the schema) and waiting on
  a locked one;
- :mod:`.paths`: the checks of a path and a busy timeout, and :func:`url_location`, the
  one parser of ``sqlite:`` URLs.
"""

from .async_store import AsyncSQLiteStore
from .errors import (
    SQLiteBusyError,
    SQLiteConfigurationError,
    SQLiteNotAppliedError,
    SQLiteOutcomeUnknownError,
    SQLiteStoreError,
)
from .paths import url_location
from .sql import SCHEMA_VERSION
from .store import SQLiteStore, open_url

__all__ = [
    "SCHEMA_VERSION",
    "AsyncSQLiteStore",
    "SQLiteBusyError",
    "SQLiteConfigurationError",
    "SQLiteNotAppliedError",
    "SQLiteOutcomeUnknownError",
    "SQLiteStore",
    "SQLiteStoreError",
    "open_url",
    "url_location",
]
