"""StoreConformance: one base class turns a store factory into a pytest test class.

::

    from tool_execution_checkpoint.testing import StoreConformance

    class TestMyStore(StoreConformance):
        def make_store(self):
            return MyStore(...)          # a fresh, empty store; sync or async

The class runs the plain checks of the storage contract, the exact round trips at the
edges (17-digit floats, -0.0, integers beyond 2**53 and 2**63, characters outside the
BMP, payloads at the payload ceiling to the byte, keys sharing prefixes of up to 255
characters), the store-contract state machine of
:mod:`tool_execution_checkpoint.testing.contract`, the model-based protocol harness and a
threaded stress check; :class:`OperableStoreConformance` adds listings checked against
the model for every status filter, time bound and page size, pruning, and ages on the
store's clock (writers with skewed clocks; see :mod:`.listings`). Knobs are class
attributes: ``harness_workers``, ``harness_keys``, ``harness_examples``,
``harness_steps``, ``harness_faults``, ``contract_examples``, ``contract_steps``,
``payload_ceiling_bytes``, ``stress_threads``, ``stress_keys`` and, for an operable
store, ``store_clock``. The example budgets
also follow the settings profile chosen by the ``TOOL_CHECKPOINT_HARNESS`` environment
variable (see :mod:`tool_execution_checkpoint.testing.profiles`).

Garbage in storage. A subclass that defines ``write_raw(self, store, key, raw)`` (write
the bytes ``raw`` as the stored record under ``key`` in the store's own storage,
bypassing the store, replacing whatever is there; a store whose storage cannot hold some
bytes, such as PostgreSQL's TEXT, stores the nearest text it can) also gets the garbage
checks: every garbage value (not UTF-8, not JSON, too deep, a huge integer, a JSON array,
string, number or ``null``, a record with a field broken, a truncated record) read back
by ``get`` is CheckpointError INVALID_CHECKPOINT (UNSUPPORTED_SCHEMA for another schema
version) or a StoreError, never a value and never another exception, and no message,
repr, attribute, ``__cause__`` or ``__context__`` in the chain holds the stored text;
listings and ``prune_delivered`` go on past it. Where storage indexes records apart from
their text (a status and a time column), ``write_raw`` indexes the garbage as a record
delivered at the Unix epoch, so that listings of delivered records and pruning meet it.
Without ``write_raw`` these checks are skipped (``unittest.SkipTest``).
"""

from .garbage import GARBAGE_EXAMPLES, GARBAGE_SECRET, garbage_values, leaks
from .operable import OperableStoreConformance
from .suite import StoreConformance, read_back_landed

__all__ = [
    "GARBAGE_EXAMPLES",
    "GARBAGE_SECRET",
    "OperableStoreConformance",
    "StoreConformance",
    "garbage_values",
    "leaks",
    "read_back_landed",
]
