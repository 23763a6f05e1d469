"""A driver of the host protocol: :func:`run_once_async` answers the machine's requests on a
real store, with the host's tool, delivery and reconcile hook."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias, Unpack

from ..records import Binding
from ..stores.core import CheckpointStore, StoreError
from ..validation import JSONValue
from .calls import CALLS, Call, check_parts, hook_answer, posts, store_operation
from .machine import HostProtocol
from .policy import CallPolicy, PolicyOptions, call_policy
from .vocabulary import (
    AsyncReconcileHook,
    HandBack,
    Posted,
    Reconcile,
    Request,
    RunOutcome,
    RunTool,
    Sleep,
    StoreFault,
)

__all__ = [
    "run_once_async",
]

if True:  # ASYNC
    import asyncio
    import contextlib
    import threading
    import weakref
    from collections.abc import Awaitable, Coroutine
    from typing import cast

    from ..errors import CheckpointError, ErrorCode
    from ..stores.core import AsyncCheckpointStore
    from ..stores.threaded import ThreadedStore
    from .calls import awaitable, blocking
    from .vocabulary import Returned

    _AwaitedStore: TypeAlias = AsyncCheckpointStore | CheckpointStore
    _AwaitedTool: TypeAlias = Callable[[], Awaitable[Any] | Any]
    _AwaitedSend: TypeAlias = Callable[[JSONValue], Awaitable[object] | object]

    _BRIDGES: dict[int, ThreadedStore[Any]] = {}
    """Each sync store's thread bridge, by the store's id while the store lives."""
    _BRIDGING = threading.Lock()

    def _bridged(store: CheckpointStore) -> ThreadedStore[Any]:
        """``store``'s one thread bridge, made at its first async call and dropped with
        it: the bridge holds the store by a weak proxy, so it never keeps it alive.

        Raises:
            CheckpointError: INVALID_ARGUMENT on the field ``store`` for a store that
                cannot be weakly referenced.
        """
        with _BRIDGING:
            bridge = _BRIDGES.get(id(store))
            if bridge is None:
                try:
                    proxy = weakref.proxy(store)
                except TypeError:
                    raise CheckpointError(
                        ErrorCode.INVALID_ARGUMENT,
                        "is sync and cannot be weakly referenced, so run_once_async cannot "
                        "bridge it: pass an async store (AsyncSQLiteStore, a ThreadedStore)",
                        field="store",
                    ) from None
                bridge = _BRIDGES[id(store)] = ThreadedStore(cast(Any, proxy))
                weakref.finalize(store, _BRIDGES.pop, id(store), None)
            return bridge

    async def _shielded(work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` to its end in a task of its own that no cancellation of the
        caller reaches: each cancellation of the wait is absorbed (anyio's cancel scopes
        cancel every await again), for the caller to re-raise its own once ``work`` is
        done. What ``work`` raised is raised; a cancelled ``work`` ends the wait."""
        task = asyncio.ensure_future(work)
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
        if not task.cancelled():
            task.result()
else:
    import time

    from .calls import refuse_async, sync_answer

    _Store: TypeAlias = CheckpointStore
    _Tool: TypeAlias = Callable[[], Any]
    _Send: TypeAlias = Callable[[JSONValue], object]


async def run_once_async(
    store: _AwaitedStore,
    binding: Binding,
    tool: _AwaitedTool,
    deliver: _AwaitedSend,
    *,
    key: str | None = None,
    policy: CallPolicy | None = None,
    **options: Unpack[PolicyOptions],
) -> RunOutcome:
    """Run ``tool`` at most once for ``binding`` and deliver its exact stored result.

    ``tool()`` is called only after this call's claim was confirmed. What it returns is
    stored and ``deliver(payload)`` sends it; the outcome says what happened (see
    :class:`RunStatus`) and carries the stored payload for every status that has one.
    :mod:`tool_execution_checkpoint.runner` lists what the tool's and the delivery's
    exceptions do.

    The asyncio driver takes a store, ``tool``, ``deliver`` and reconcile hook that are
    each async or sync, and awaits what one returns when it is awaitable; a sync store
    runs on a thread bridge of its own (one per store, for every call), never on the
    event loop. The sync driver takes sync ones only: it refuses an async one before
    anything runs, and a sync one that returns an awaitable has it closed (a tool's marks
    the execution uncertain; a delivery's is not sent if it was a coroutine not started,
    and of unknown outcome otherwise).

    A cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``) propagates once
    the call's bookkeeping is settled: while the tool runs, the execution is marked
    uncertain (reason ``cancelled``); on a store write or a pause, the write is read
    back, and once the tool has run its result's write (resent within ``write_budget``)
    or its uncertain mark is finished. Nothing runs or is sent after it: a claim that
    landed is released (see :meth:`Call.settling`). The asyncio driver settles in a task
    the cancellation does not reach (an anyio cancel scope's included).

    Args:
        store: The store.
        binding: The call's binding.
        tool: Called with no arguments, at most once.
        deliver: Called with the stored payload. Raising one of ``not_sent`` releases the
            claim for a later resend; any other exception leaves the delivery to
            reconcile. :data:`~.vocabulary.hand_back` (or a :class:`~.vocabulary.HandBack`)
            where the framework delivers the result the call returns: the result is then
            recorded delivered in the write that stores it, and handed back in the
            outcome.
        key: The store key (default: :func:`~.stores.core.checkpoint_key` of the binding).
        policy: The call's options as one :class:`CallPolicy` (default: one built from
            ``options``).
        options: :class:`CallPolicy`'s fields by keyword (``write_budget=5``, say); each
            must hold the policy's own value when ``policy`` is given too.

    Raises:
        CheckpointError: BINDING_CONFLICT when the stored record belongs to another
            binding; INVALID_ARGUMENT for a store without the store methods (or a sync
            store that cannot be weakly referenced, for the asyncio driver), a tool or
            deliver that is not callable, an async part given to the sync driver, a bad
            option (:class:`CallPolicy`), or a keyword that conflicts with ``policy`` (on
            the keyword's field); any error of the stored record's validation.
        TypeError: for a keyword that is not an option.
        BaseException: A cancellation or a ``pass_through`` exception from the tool,
            after the execution was marked uncertain; a ``not_run`` exception, after the
            claim was released; a cancellation of ``deliver``; a cancellation of a store
            operation or a pause, once what the call holds is settled.
    """
    check_parts(store, tool, deliver)
    policy = call_policy(policy, options)
    if True:  # ASYNC
        # a sync store runs on its bridge (``store`` keeps it alive while the call runs)
        used = _bridged(cast(CheckpointStore, store)) if blocking(store) else store
    else:
        refuse_async(store, tool, deliver, policy.reconcile)
        used = store
    protocol = HostProtocol(binding, policy, hands_back=isinstance(deliver, HandBack))
    call = Call.start(protocol, key, store)
    try:
        await _answer_requests(call, used, tool, deliver, policy.reconcile)
    except BaseException:
        call.abandoned()
        raise
    return call.outcome()


async def _answer_requests(
    call: Call,
    store: _AwaitedStore,
    tool: _AwaitedTool,
    deliver: _AwaitedSend,
    reconcile: AsyncReconcileHook | None,
) -> None:
    """Answer the call's requests until it has an outcome."""
    while not isinstance(request := call.request, RunOutcome):
        if isinstance(request, Reconcile):
            assert reconcile is not None  # asked only when there is a hook
            try:
                found = reconcile(call.stuck(request.record))
                if True:  # ASYNC
                    if awaitable(found):
                        found = await found
            except BaseException as error:  # every end of the hook is an answer
                call.raised(error)
            else:
                call.answer(hook_answer(found))
        elif isinstance(request, CALLS):
            try:
                value = tool() if isinstance(request, RunTool) else deliver(request.result.payload)
                if True:  # ASYNC
                    if awaitable(value):
                        value = await value
            except BaseException as error:  # every end of the tool or the send is an answer
                call.raised(error)
            else:
                if True:  # ASYNC
                    call.answer(Returned(value) if isinstance(request, RunTool) else None)
                else:
                    call.answer(sync_answer(request, value))
        else:
            try:
                answer = await _carried_out(store, call, request)
            except BaseException as error:  # a cancellation settles what the call holds
                if isinstance(error, Exception | GeneratorExit) or not call.interrupted():
                    raise
                if True:  # ASYNC
                    await _shielded(_settle(call, store))
                else:
                    _settle(call, store)
                raise
            call.answer(answer)


async def _carried_out(store: _AwaitedStore, call: Call, request: Request) -> Any:
    """Carry out a store request or a pause: the answer (a store's fault is StoreFault),
    told to the operation's span (:meth:`Call.watch`)."""
    if isinstance(request, Sleep):
        if True:  # ASYNC
            await asyncio.sleep(request.seconds)
        else:
            time.sleep(request.seconds)
        return None
    post = posts(store, request)
    watched = call.watch(request, post=post)
    try:
        answer = store_operation(store, call.key, request, post=post)
        if True:  # ASYNC
            if awaitable(answer):
                answer = await answer
    except StoreError:
        answer = StoreFault()
    except BaseException as error:
        if watched is not None:
            watched.raised(error)
        raise
    else:
        if answer is None and post:
            answer = Posted()
    if watched is not None:
        watched.ended(answer)
    return answer


async def _settle(call: Call, store: _AwaitedStore) -> None:
    """Settle what the call holds after a cancellation (:meth:`Call.settling`)."""
    while (request := call.settling()) is not None:
        call.answer(await _carried_out(store, call, request))
