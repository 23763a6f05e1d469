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
- A cancellation on a store write or a pause is re-raised once what the call holds is
  settled: the write read back, the tool's result (or its mark) stored within
  ``write_budget``, and a claim that landed released, since nothing runs or is sent
  after it.
- A tool that raises one of the host's ``not_run`` types (by default
  :class:`ToolDidNotRun`) stopped before any effect: the claim is released, the
  exception re-raised, and the next call runs the tool.
- A delivery is released for a later resend only when the send is known not to have
  happened: ``deliver`` raised :class:`DeliveryNotSent` (always) or one of ``not_sent``
  (by default also ``ConnectionRefusedError``). Any other exception leaves the record delivering and
  the call answers ``needs-delivery-reconciliation``.
- Where the framework delivers what the call returns, pass :data:`hand_back` as
  ``deliver``: the result is stored and recorded delivered in one write (two writes a
  call), and the outcome carries the stored payload to return.
"""

from . import drive, drive_async, machine, policy, state, vocabulary
from .drive import *  # noqa: F403
from .drive_async import *  # noqa: F403
from .machine import *  # noqa: F403
from .policy import *  # noqa: F403
from .state import *  # noqa: F403
from .vocabulary import *  # noqa: F403

__all__: list[str] = []
__all__ += vocabulary.__all__
__all__ += policy.__all__
__all__ += state.__all__
__all__ += machine.__all__
__all__ += drive_async.__all__
__all__ += drive.__all__
