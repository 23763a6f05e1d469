# Generated from src/tool_execution_checkpoint/adapters/langgraph_calls_async.py
# by tools/async_to_sync.py: do not edit. Edit that module and run
# `python tools/async_to_sync.py` (make lint checks it).
"""The LangGraph adapter's interceptor (the module that ends in ``_async`` is written, for
asyncio; the other is generated from it by ``tools/async_to_sync.py``)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ..guard_base import GUARD_ANSWERS
from .langgraph_base import Execute, ToolCallGuards, to_host


class ToolCallInterceptor(ToolCallGuards):
    """One of ``ToolNode``'s interceptors."""

    def wrap_tool_call(
        self, request: ToolCallRequest, execute: Execute
    ) -> ToolMessage | Command[Any]:
        """``ToolNode(wrap_tool_call=...)``: run the call at most once (the sync
        interceptor needs a sync store).

        Raises:
            CallNotAnswered, ToolRaisedEarlier, CheckpointError: the guard's answers (see
                :mod:`~.langgraph`), as ``GraphBubbleUp`` subclasses of themselves.
        """
        if not self._guarded(request):
            return execute(request)
        try:
            return self._guard(request).call(
                self.call_id(request),
                request.tool_call["args"],
                lambda: execute(request),
                authoritative=True,
            )
        except GUARD_ANSWERS as answer:
            to_host(answer)
            raise
