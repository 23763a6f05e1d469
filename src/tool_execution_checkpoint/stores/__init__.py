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

This package re-exports the core's names (``core.__all__``); the stores and the opener are
imported from their modules (the package :mod:`tool_execution_checkpoint` holds the main
ones too).
"""

from . import core
from .core import *  # noqa: F403 - the names core.__all__ lists

__all__ = core.__all__
