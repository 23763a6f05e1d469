# Generated from src/tool_execution_checkpoint/adapters/openai_agents_calls_async.py
# by tools/async_to_sync.py: do not edit. Edit that module and run
# `python tools/async_to_sync.py` (make lint checks it).
"""The OpenAI Agents adapter's tool in a run (the module that ends in ``_async`` is
written, for asyncio; the other is generated from it by ``tools/async_to_sync.py``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from agents.tool_context import ToolContext

from ..guard_base import GUARD_REFUSALS

Split = Callable[[tuple[Any, ...], dict[str, Any]], tuple[object, tuple[Any, ...]]]
"""Takes the context the SDK passed off a call's positional and keyword arguments: the
context, and the positional arguments the guarded tool takes."""


def in_run(
    tool: Callable[..., Any],
    guarded: Callable[..., Any],
    split: Split,
    caller: ContextVar[object],
    answer: Callable[[Exception, ToolContext[Any]], str],
) -> Callable[..., Any]:
    """``guarded`` behind the context the SDK passes, which ``split`` takes off the call's
    arguments: the context is ``caller``'s value while the call runs (so that the guard
    names the call by it), and a refusal in a run (a ``ToolContext`` passed) is returned
    as ``answer`` words it; outside a run the refusal propagates."""

    @functools.wraps(tool)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        context, rest = split(args, kwargs)
        token = caller.set(context)
        try:
            return guarded(*rest, **kwargs)
        except GUARD_REFUSALS as refusal:
            if not isinstance(context, ToolContext):
                raise
            return answer(refusal, context)
        finally:
            caller.reset(token)

    return wrapper
