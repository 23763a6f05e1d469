"""tool-execution-checkpoint: run an AI agent's tool at most once, deliver its exact result.

An application-owned, persisted checkpoint for one tool call. The host claims the
execution, runs the tool only after its store's compare-and-swap of the claim won, stores
the exact result, and delivers it from storage; after a reconnect a completed checkpoint
says ``deliver``, never ``execute``. The protocol is the transition table in spec/; this
package is its pure, I/O-free core.
"""

from .errors import CheckpointError, ErrorCode
from .fingerprint import fingerprint
from .guard import (
    CallInFlight,
    CallNeedsReconciliation,
    CallNotAnswered,
    CallResultPruned,
    CallStoreUnavailable,
    ResultCodec,
    ToolGuard,
    ToolRaisedEarlier,
    checkpointed,
    current_call_id,
    result_codec,
    tool_call,
)
from .memory import MemoryStore
from .opening import open_store, register_store
from .records import Binding, Checkpoint, Delivery, Execution, Result, Uncertainty
from .runner import (
    DeliveryNotSent,
    HostProtocol,
    RunOutcome,
    RunStatus,
    ToolDidNotRun,
    ToolOutcomeUnknown,
    default_error_payload,
    run_once,
    run_once_async,
)
from .sqlite import (
    AsyncSQLiteStore,
    SQLiteBusyError,
    SQLiteConfigurationError,
    SQLiteOutcomeUnknownError,
    SQLiteStore,
    SQLiteStoreError,
)
from .store import (
    AsyncCheckpointStore,
    BrokenRecord,
    CheckpointStore,
    ClosableStore,
    OperableCheckpointStore,
    OutcomeUnknownError,
    RecordSummary,
    StoredRecord,
    StoreError,
    checkpoint_key,
    decode_stored,
)
from .table import TABLE, Action, Status
from .transitions import (
    Decision,
    RecordLike,
    Transition,
    claim_delivery,
    claim_execution,
    complete_and_claim_delivery,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    create_claimed,
    decide_checkpoint,
    mark_execution_uncertain,
    prune_result,
    release_delivery,
    release_execution,
    validate_checkpoint,
)
from .validation import JSONValue

__all__ = [
    "TABLE",
    "Action",
    "AsyncCheckpointStore",
    "AsyncSQLiteStore",
    "Binding",
    "BrokenRecord",
    "CallInFlight",
    "CallNeedsReconciliation",
    "CallNotAnswered",
    "CallResultPruned",
    "CallStoreUnavailable",
    "Checkpoint",
    "CheckpointError",
    "CheckpointStore",
    "ClosableStore",
    "Decision",
    "Delivery",
    "DeliveryNotSent",
    "ErrorCode",
    "Execution",
    "HostProtocol",
    "JSONValue",
    "MemoryStore",
    "OperableCheckpointStore",
    "OutcomeUnknownError",
    "RecordLike",
    "RecordSummary",
    "Result",
    "ResultCodec",
    "RunOutcome",
    "RunStatus",
    "SQLiteBusyError",
    "SQLiteConfigurationError",
    "SQLiteOutcomeUnknownError",
    "SQLiteStore",
    "SQLiteStoreError",
    "Status",
    "StoreError",
    "StoredRecord",
    "ToolDidNotRun",
    "ToolGuard",
    "ToolOutcomeUnknown",
    "ToolRaisedEarlier",
    "Transition",
    "Uncertainty",
    "checkpoint_key",
    "checkpointed",
    "claim_delivery",
    "claim_execution",
    "complete_and_claim_delivery",
    "complete_delivery",
    "complete_execution",
    "create_checkpoint",
    "create_claimed",
    "current_call_id",
    "decide_checkpoint",
    "decode_stored",
    "default_error_payload",
    "fingerprint",
    "mark_execution_uncertain",
    "open_store",
    "prune_result",
    "register_store",
    "release_delivery",
    "release_execution",
    "result_codec",
    "run_once",
    "run_once_async",
    "tool_call",
    "validate_checkpoint",
]

__version__ = "0.1.0"
