"""The LangGraph adapter's interceptor (the module that ends in ``_async`` is written, for
asyncio; the other is generated from it by ``tools/async_to_sync.py``)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ..guard_base import GUARD_ANSWERS
from .langgraph_base import AsyncExecute, ToolCallGuards, to_host


class AsyncToolCallInterceptor(ToolCallGuards):
    """One of ``ToolNode``'s interceptors."""

    async def awrap_tool_call(
        self, request: ToolCallRequest, execute: AsyncExecute
    ) -> ToolMessage | Command[Any]:
        """``ToolNode(awrap_tool_call=...)``: run the call at most once (the sync
        interceptor needs a sync store).

        Raises:
            CallNotAnswered, ToolRaisedEarlier, CheckpointError: the guard's answers (see
                :mod:`~.langgraph`), as ``GraphBubbleUp`` subclasses of themselves.
        """
        if not self._guarded(request):
            return await execute(request)
        try:
            return await self._guard(request).call_async(
                self.call_id(request),
                request.tool_call["args"],
                lambda: execute(request),
                authoritative=True,
            )
        except GUARD_ANSWERS as answer:
            to_host(answer)
            raise
