"""tool-execution-checkpoint: run an AI agent's tool at most once, deliver its exact result.

An application-owned, persisted checkpoint for one tool call. The host claims the
execution, runs the tool only after its store's compare-and-swap of the claim won, stores
the exact result, and delivers it from storage; after a reconnect a completed checkpoint
says ``deliver``, never ``execute``. The protocol is the transition table in spec/; this
package is its pure, I/O-free core.
"""

from .codecs import ResultCodec, result_codec
from .errors import CheckpointError, ErrorCode
from .fingerprint import arguments_fingerprint, canonical, fingerprint
from .guard import (
    CallInFlight,
    CallNeedsReconciliation,
    CallNotAnswered,
    CallResultPruned,
    CallStoreUnavailable,
    ToolGuard,
    ToolRaisedEarlier,
    checkpointed,
)
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
from .stores.core import (
    AsyncCheckpointStore,
    BrokenRecord,
    CheckpointStore,
    ClosableStore,
    OperableCheckpointStore,
    OutcomeUnknownError,
    RecordSummary,
    StoreConfigurationError,
    StoredRecord,
    StoreError,
    StoreNotAppliedError,
    StoreUnavailableError,
    checkpoint_key,
    decode_stored,
)
from .stores.memory import MemoryStore
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
    "CallScope",
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
    "Intent",
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
    "ToolDidNotRun",
    "ToolGuard",
    "ToolOutcomeUnknown",
    "ToolRaisedEarlier",
    "Transition",
    "Uncertainty",
    "arguments_fingerprint",
    "call_scope",
    "canonical",
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
    "current_idempotency_key",
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
