"""The host protocol: run a tool at most once and deliver its exact stored result.

:func:`run_once` and :func:`run_once_async` drive one machine, :class:`HostProtocol`,
on a real store; :class:`CallPolicy` holds a call's options. docs/runner.md describes
the machine and its drivers. What the tool's and the delivery's exceptions do:

- The tool runs only after this call's execution claim is known to have landed.
- A tool that raises :class:`ToolOutcomeUnknown`, is cancelled (any ``BaseException``
  that is not an ``Exception``: ``asyncio.CancelledError``, ``KeyboardInterrupt``) or
  raises one of the host's ``pass_through`` types marks the execution uncertain; the
  cancellation and the pass-through exception are re-raised after the mark. Any other
  exception is a handler error: ``on_tool_error(error)`` is stored and delivered.
- A tool that raises one of the host's ``not_run`` types (by default
  :class:`ToolDidNotRun`) stopped before any effect: the claim is released, the
  exception re-raised, and the next call runs the tool.
- A delivery is released for a later resend only when the send is known not to have
  happened: ``deliver`` raised one of ``not_sent`` (by default :class:`DeliveryNotSent`
  and ``ConnectionRefusedError``). Any other exception leaves the record delivering and
  the call answers ``needs-delivery-reconciliation``.
"""

from .drive import run_once
from .drive_async import run_once_async
from .machine import HostProtocol
from .policy import LOGGER, MAX_SECONDS, WRITE_BUDGET, CallPolicy, PolicyOptions, call_policy
from .state import (
    FIRST_PAUSE,
    HANDLERS,
    LANDED,
    LONGEST_PAUSE,
    NOT_LANDED,
    RESENDABLE,
    RETRIES,
    ROUNDS,
    UNSETTLED,
    CallState,
    Phase,
    Step,
    claim_id,
    held_retries,
    pause_before,
)
from .vocabulary import (
    CONFIRMED_NOT_SENT,
    DEFAULT_NOT_RUN,
    DEFAULT_NOT_SENT,
    OVERTAKEN,
    VANISHED,
    AsyncReconcileHook,
    Create,
    Deliver,
    DeliveryNotSent,
    Found,
    Get,
    NotThere,
    Raised,
    Reconcile,
    ReconcileHook,
    Request,
    Returned,
    RunOutcome,
    RunStatus,
    RunTool,
    Sleep,
    StoreFault,
    StuckCall,
    Swap,
    ToolDidNotRun,
    ToolOutcomeUnknown,
    default_error_payload,
)

__all__ = [
    "CONFIRMED_NOT_SENT",
    "DEFAULT_NOT_RUN",
    "DEFAULT_NOT_SENT",
    "FIRST_PAUSE",
    "HANDLERS",
    "LANDED",
    "LOGGER",
    "LONGEST_PAUSE",
    "MAX_SECONDS",
    "NOT_LANDED",
    "OVERTAKEN",
    "RESENDABLE",
    "RETRIES",
    "ROUNDS",
    "UNSETTLED",
    "VANISHED",
    "WRITE_BUDGET",
    "AsyncReconcileHook",
    "CallPolicy",
    "CallState",
    "Create",
    "Deliver",
    "DeliveryNotSent",
    "Found",
    "Get",
    "HostProtocol",
    "NotThere",
    "Phase",
    "PolicyOptions",
    "Raised",
    "Reconcile",
    "ReconcileHook",
    "Request",
    "Returned",
    "RunOutcome",
    "RunStatus",
    "RunTool",
    "Sleep",
    "Step",
    "StoreFault",
    "StuckCall",
    "Swap",
    "ToolDidNotRun",
    "ToolOutcomeUnknown",
    "call_policy",
    "claim_id",
    "default_error_payload",
    "held_retries",
    "pause_before",
    "run_once",
    "run_once_async",
]
