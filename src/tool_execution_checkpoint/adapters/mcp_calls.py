# Generated from src/tool_execution_checkpoint/adapters/mcp_calls_async.py
# by tools/async_to_sync.py: do not edit. Edit that module and run
# `python tools/async_to_sync.py` (make lint checks it).
"""The MCP adapter's guarded tool (the module that ends in ``_async`` is written, for
asyncio; the other is generated from it by ``tools/async_to_sync.py``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..guard import ToolGuard
from ..guard_base import GUARD_ANSWERS
from ..guard_calls import answered

Prepare = Callable[[dict[str, Any]], tuple[str | None, dict[str, Any], dict[str, Any]]]
"""Reads a call's idempotency key (or None), its fingerprinted arguments and the tool's
own keyword arguments off the keyword arguments the SDK passes."""


def guarded_tool(
    guard: ToolGuard,
    tool: Callable[..., Any],
    prepare: Prepare,
    answer: Callable[[Exception], BaseException],
) -> Callable[..., Any]:
    """``tool`` as the SDK calls it. A call with a key runs through ``guard`` with the key
    as the authoritative id, so no block of the server process replaces it, and each of
    the guard's errors is raised as ``answer`` makes it, outside the ``except``: no
    ``__context__`` keeps the guard's error, whose outcome holds the record (the key among
    it, and for some statuses the payload). A call without a key (``prepare`` let it
    through) runs the tool unguarded."""
    call = answered(functools.partial(guard.call, authoritative=True), GUARD_ANSWERS, answer)

    def guarded(**kwargs: Any) -> Any:
        identity, arguments, own = prepare(kwargs)
        if identity is None:
            return tool(**own)
        return call(identity, arguments, lambda: tool(**own))

    return guarded
