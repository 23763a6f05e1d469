# Generated from src/tool_execution_checkpoint/guard_calls_async.py
# by tools/async_to_sync.py: do not edit. Edit that module and run
# `python tools/async_to_sync.py` (make lint checks it).
"""The I/O half of :class:`~.guard.ToolGuard`: its call, the tool's run inside it, and the
wrappers :func:`~.guard.checkpointed` and the adapters build on it (the module that ends in
``_async`` is written, for asyncio; the other is generated from it by
``tools/async_to_sync.py``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from .codecs import ResultCodec
from .guard_base import GuardBase, Live, Tool, holding, sync_store
from .identity import claim_identity, running_call
from .runner import ToolOutcomeUnknown, run_once
from .telemetry import guarding
from .validation import JSONValue

T = TypeVar("T")

Binder = Callable[[tuple[Any, ...], dict[str, Any]], tuple[str | None, dict[str, object]]]
"""Reads a call's id (or None) and its fingerprinted arguments off its positional and
keyword arguments."""


class GuardCalls(GuardBase):
    """A guard's entry point: one call of its tool, run at most once."""

    def call(
        self,
        call_id: str | None,
        arguments: Mapping[str, object],
        tool: Tool[T],
        *,
        authoritative: bool = False,
    ) -> T:
        """Run ``tool`` at most once for this call and return its result (the module
        docstring of :mod:`~.guard` says what is returned and raised). ``call_id`` is the
        framework's id of the call, or None; :func:`~.identity.claim_identity` says which id
        is used (with ``authoritative``, always ``call_id``). The sync call refuses an async
        store (CheckpointError INVALID_ARGUMENT on ``store``): a framework's async entry
        point calls the async one, which takes either (a sync store runs on its thread
        bridge: see :func:`~.runner.run_once_async`) and awaits what ``tool`` returns
        only when it is awaitable."""
        store = sync_store(self.store)
        intent = self.intent_of(arguments)
        claim = claim_identity(intent, call_id, authoritative=authoritative)
        binding = self._binding(claim.call_id, intent)
        with holding(claim, intent) as live, guarding(binding):
            outcome = run_once(
                store,
                binding,
                functools.partial(run_tool, live, tool, self.codec, self.namespace, claim.call_id),
                self.hand_back,
                policy=self._run_policy,
            )
            return cast(T, self._answer(outcome, live))


def run_tool(
    live: Live, tool: Tool[Any], codec: ResultCodec[Any], namespace: str, call_id: str
) -> JSONValue:
    """Run ``tool`` as the call ``call_id`` of ``namespace``, keeping in ``live`` what it
    returned or raised, and return the stored form of its value.

    Raises:
        ToolOutcomeUnknown: the tool's own, or the codec refused the value.
        Exception: what the tool raised.
    """
    try:
        with running_call(namespace, call_id):
            value = tool()
            live.value = value
    except ToolOutcomeUnknown:
        raise
    except Exception as error:
        live.error, live.produced = error, True
        raise
    return live.envelope(codec)


def guarded_function(
    guard: GuardCalls, tool: Callable[..., Any], bind: Binder
) -> Callable[..., Any]:
    """``tool`` guarded by ``guard``: each call, bound by ``bind``, goes through the guard's
    call; the wrapper has the tool's name and signature, and the guard as
    ``__checkpoint_guard__``."""

    @functools.wraps(tool)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        identity, arguments = bind(args, kwargs)
        return guard.call(identity, arguments, functools.partial(tool, *args, **kwargs))

    guarded.__checkpoint_guard__ = guard  # type: ignore[attr-defined]
    return guarded


def answered(
    function: Callable[..., Any],
    errors: tuple[type[Exception], ...],
    answer: Callable[[Exception], BaseException],
) -> Callable[..., Any]:
    """``function`` with each of ``errors`` it raises replaced by ``answer(error)``, what a
    framework is told instead. The answer is raised outside the ``except``, so that its
    chain keeps nothing of the guard's error, whose outcome holds the record."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except errors as error:
            refusal = error
        raise answer(refusal)

    return wrapper
