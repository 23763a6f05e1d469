"""tool-execution-checkpoint: run an AI agent's tool at most once, deliver its exact result.

An application-owned, persisted checkpoint for one tool call. The host claims the
execution, runs the tool only after its store's compare-and-swap of the claim won, stores
the exact result, and delivers it from storage; after a reconnect a completed checkpoint
says ``deliver``, never ``execute``. The protocol is the transition table in spec/; this
package is its pure, I/O-free core.
"""

from . import guard as _guard
from .codecs import ResultCodec, result_codec
from .errors import CheckpointError, ErrorCode
from .fingerprint import arguments_fingerprint, canonical, fingerprint
from .guard import *  # noqa: F403 (the one-line guard and what its calls raise)
from .identity import (
    CallScope,
    Intent,
    call_scope,
    current_call_id,
    current_idempotency_key,
    tool_call,
)
from .records import Binding, Checkpoint, Delivery, Execution, Result, Uncertainty
from .runner import (
    MARK_POSTED,
    CallPolicy,
    DeliveryNotSent,
    Found,
    HandBack,
    HostProtocol,
    NotThere,
    RunOutcome,
    RunStatus,
    StuckCall,
    ToolDidNotRun,
    ToolOutcomeUnknown,
    default_error_payload,
    hand_back,
    run_once,
    run_once_async,
)
from .stores.core import (
    AsyncCheckpointStore,
    BrokenRecord,
    CheckpointStore,
    ClosableStore,
    Listing,
    OperableCheckpointStore,
    OutcomeUnknownError,
    PostingStore,
    RecordSummary,
    StoreConfigurationError,
    StoredRecord,
    StoreError,
    StoreNotAppliedError,
    StoreUnavailableError,
    checkpoint_key,
    decode_stored,
)
from .stores.memory import AsyncMemoryStore, MemoryStore
from .stores.opening import open_store, register_store
from .stores.sqlite import (
    AsyncSQLiteStore,
    SQLiteBusyError,
    SQLiteConfigurationError,
    SQLiteNotAppliedError,
    SQLiteOutcomeUnknownError,
    SQLiteStore,
    SQLiteStoreError,
)
from .table import TABLE, Action, Status
from .transitions import (
    Decision,
    RecordLike,
    Transition,
    create_checkpoint,
    decide_checkpoint,
    validate_checkpoint,
)
from .transitions import steps as _steps
from .transitions.steps import *  # noqa: F403 (the transitions and composed steps)
from .validation import JSONValue

__all__ = [
    "MARK_POSTED",
    "TABLE",
    "Action",
    "AsyncCheckpointStore",
    "AsyncMemoryStore",
    "AsyncSQLiteStore",
    "Binding",
    "BrokenRecord",
    "CallPolicy",
    "CallScope",
    "Checkpoint",
    "CheckpointError",
    "CheckpointStore",
    "ClosableStore",
    "Decision",
    "Delivery",
    "DeliveryNotSent",
    "ErrorCode",
    "Execution",
    "Found",
    "HandBack",
    "HostProtocol",
    "Intent",
    "JSONValue",
    "Listing",
    "MemoryStore",
    "NotThere",
    "OperableCheckpointStore",
    "OutcomeUnknownError",
    "PostingStore",
    "RecordLike",
    "RecordSummary",
    "Result",
    "ResultCodec",
    "RunOutcome",
    "RunStatus",
    "SQLiteBusyError",
    "SQLiteConfigurationError",
    "SQLiteNotAppliedError",
    "SQLiteOutcomeUnknownError",
    "SQLiteStore",
    "SQLiteStoreError",
    "Status",
    "StoreConfigurationError",
    "StoreError",
    "StoreNotAppliedError",
    "StoreUnavailableError",
    "StoredRecord",
    "StuckCall",
    "ToolDidNotRun",
    "ToolOutcomeUnknown",
    "Transition",
    "Uncertainty",
    "arguments_fingerprint",
    "call_scope",
    "canonical",
    "checkpoint_key",
    "create_checkpoint",
    "current_call_id",
    "current_idempotency_key",
    "decide_checkpoint",
    "decode_stored",
    "default_error_payload",
    "fingerprint",
    "hand_back",
    "open_store",
    "register_store",
    "result_codec",
    "run_once",
    "run_once_async",
    "tool_call",
    "validate_checkpoint",
]

__all__ += _guard.__all__
__all__ += _steps.__all__

__version__ = "0.1.0"
