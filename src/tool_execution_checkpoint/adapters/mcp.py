"""MCP Python SDK: guard a server's tools so a call the client retries runs at most once.

One line, under the SDK's own decorator (mcp 2.x, ``MCPServer``, formerly ``FastMCP``)::

    server = MCPServer("mail")

    @server.tool()
    @checkpointed_tool(SQLiteStore("calls.db"))
    def send_email(to: str, body: str) -> Receipt: ...

Why each choice, with the facts from the SDK and the specification: ``docs/frameworks.md``.

**The call id** is an idempotency key the client sends in the request's ``_meta``, under
:data:`IDEMPOTENCY_KEY`: one key per logical call (a UUID), kept with the intent before
sending and sent again on every retry of that call::

    key = str(uuid.uuid4())  # stored with the intent before the first send
    await client.call_tool("send_email", args, meta={IDEMPOTENCY_KEY: key})

Two clients that choose the same key share one call; a server with several tenants
passes ``call_id=`` a function of the ``Context`` that adds the tenant
(``f"{tenant}:{idempotency_key(ctx)}"``). The key always names the call: the guard takes
it as authoritative, so no ``tool_call`` or ``call_scope`` of the server process replaces
it; a guarded function the tool itself calls is numbered within the key's call. A call
without a key is refused before the tool runs (``MCPError`` INVALID_PARAMS naming the
``_meta`` key); ``require_key=False`` runs it unguarded instead (no record, no replay).

**The fingerprint** is of the tool's arguments as the SDK validated them, without the
``Context`` parameter and the names in ``exclude``; with ``intent=``, of only the
arguments named there. A tool with no ``Context`` parameter gets one (keyword-only,
:data:`CONTEXT_PARAMETER`) that the SDK fills and leaves out of the tool's input schema;
the tool itself is called without it.

**What the client gets.** The first call: what the tool returned, converted by the SDK as
usual. A retry with the same key: the stored result, rebuilt to the return annotation's
type (:func:`~tool_execution_checkpoint.result_codec`) and converted the same way; the
tool does not run. A tool that raised: the SDK's ``isError`` result, and on a retry
``isError`` again, naming the exception's type (its message is not stored). A tool that
raised one of ``not_run`` (it stopped before any effect) reaches the client as the SDK
reports it, nothing is stored, and the next call with the same key runs the tool. Inside
the tool, ``current_idempotency_key()`` is the same on every call with one key and
differs between keys: pass it to the external API with the effect.

**Refusals** are ``MCPError``; no message or ``data`` holds an argument, a result or the
key:

- the key was used before with other arguments (those in ``intent``) or for another
  tool: INVALID_PARAMS, ``{"code": "BINDING_CONFLICT", "retrySameKey": false}``; the
  earlier call stands, and a new call needs a new key;
- in flight (another attempt holds the claim: still running, or its worker died):
  INTERNAL_ERROR, ``{"status": "in-flight", "retrySameKey": true}``;
- its outcome is unknown: INTERNAL_ERROR, ``{"status": "needs-reconciliation",
  "retrySameKey": false}``; only an operator settles it (``tool-checkpoint reconcile``);
- answered before and its result since pruned: INTERNAL_ERROR, ``{"status":
  "result-pruned", "retrySameKey": false}``;
- the store failed: INTERNAL_ERROR, ``{"status": "store-unavailable", "retrySameKey":
  true}``.

**Control flow.** An ``MCPError`` the tool raises passes through (``pass_through``) after
the execution is marked uncertain; a retry with the same key is then refused (needs
reconciliation). One the tool raises before any effect belongs in ``not_run`` (checked
first), which releases the claim instead. A body annotated to return an
``InputRequiredResult`` is refused when decorating; one that returns it anyway has it
refused as a result (the record is marked uncertain): ask through ``Resolve(...)``
parameters instead.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Collection
from typing import Any, ParamSpec, TypeVar, cast

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, InputRequiredResult

from ..codecs import ResultCodec, result_codec
from ..errors import CheckpointError, ErrorCode
from ..guard import (
    CallInFlight,
    CallNeedsReconciliation,
    CallNotAnswered,
    CallResultPruned,
    CallStoreUnavailable,
    ToolGuard,
    ToolRaisedEarlier,
    refuse_generator,
)
from ..guard_base import framework_policy
from ..runner import DEFAULT_NOT_RUN, CallPolicy
from ..stores.core import AsyncCheckpointStore, CheckpointStore
from ..table import TABLE
from ..validation import JSONValue
from .mcp_calls import guarded_tool
from .mcp_calls_async import guarded_tool_async

__all__ = ["CONTEXT_PARAMETER", "IDEMPOTENCY_KEY", "checkpointed_tool", "idempotency_key"]

P = ParamSpec("P")
R = TypeVar("R")

IDEMPOTENCY_KEY = "io.github.tool-execution-checkpoint/idempotency-key"
"""The ``_meta`` key of a tools/call request that holds the call's idempotency key."""

CONTEXT_PARAMETER = "checkpoint_context"
"""The keyword-only ``Context`` parameter added to a tool that has none."""


def idempotency_key(ctx: Context[Any, Any]) -> str | None:
    """The idempotency key the client sent in this request's ``_meta``, or None.

    Raises:
        MCPError: INVALID_PARAMS when the key is there and not a non-empty string.
    """
    meta = ctx.request_context.meta
    value = None if meta is None else cast(dict[str, object], meta).get(IDEMPOTENCY_KEY)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise MCPError(INVALID_PARAMS, f"_meta[{IDEMPOTENCY_KEY!r}] is not a non-empty string")
    return value


class _FinalResults:
    """The return annotation's codec, refusing an ``InputRequiredResult``: a round of
    questions to the client is not the call's result."""

    def __init__(self, codec: ResultCodec[Any]) -> None:
        self._codec = codec

    def encode(self, value: Any) -> JSONValue:
        if isinstance(value, InputRequiredResult):
            raise CheckpointError(
                ErrorCode.PAYLOAD_NOT_JSON,
                "is an InputRequiredResult: ask through Resolve(...) parameters",
                field="result",
            )
        return self._codec.encode(value)

    def decode(self, payload: JSONValue) -> Any:
        return self._codec.decode(payload)


_UNANSWERED: tuple[tuple[type[CallNotAnswered], str, bool, str], ...] = (
    (
        CallInFlight,
        "in-flight",
        True,
        "another attempt with this idempotency key holds the call (it may still be running,"
        " or its server died while running it): send the same key again later; a call"
        " still in flight after the tool's longest run is settled by an operator"
        " (tool-checkpoint list --older-than shows it)",
    ),
    (
        CallNeedsReconciliation,
        "needs-reconciliation",
        False,
        "whether this call's effect happened is unknown: the tool will not run again for"
        " this key until an operator settles the record (tool-checkpoint reconcile)",
    ),
    (
        CallResultPruned,
        "result-pruned",
        False,
        "this call was answered before and its stored result has since been pruned:"
        " the tool will not run again for this key",
    ),
    (
        CallStoreUnavailable,
        "store-unavailable",
        True,
        "the server's checkpoint store is unavailable: send the same key again later",
    ),
)
"""Each call with nothing to hand back: its ``status``, whether the client may send the
same key again, and what the client is told (any other: as needing reconciliation)."""

_BINDING_CONFLICT = (
    "this idempotency key belongs to an earlier call with other arguments or another"
    " tool, which stands; this call did not run. Do not resend it: a new call needs a"
    " new key"
)


def _answer(error: Exception) -> Exception:
    """What the client is told instead of a result: no argument, result or key in it."""
    if isinstance(error, ToolRaisedEarlier):
        return ToolError(str(error))
    if isinstance(error, CallNotAnswered):
        _, status, retry, message = next(
            (row for row in _UNANSWERED if isinstance(error, row[0])), _UNANSWERED[1]
        )
        return MCPError(INTERNAL_ERROR, message, data={"status": status, "retrySameKey": retry})
    if isinstance(error, CheckpointError):
        conflict = error.code is ErrorCode.BINDING_CONFLICT
        message = _BINDING_CONFLICT if conflict else str(error)
        data = {"code": error.code.value, "retrySameKey": False}
        return MCPError(INVALID_PARAMS, message, data=data)
    return error


def _returns_input_required(annotation: object) -> bool:
    if annotation is InputRequiredResult:
        return True
    return any(_returns_input_required(arg) for arg in typing.get_args(annotation))


def checkpointed_tool(
    store: CheckpointStore | AsyncCheckpointStore,
    *,
    namespace: str = "default",
    name: str | None = None,
    revision: str = "1",
    intent: Collection[str] | None = None,
    exclude: Collection[str] = (),
    not_run: tuple[type[BaseException], ...] = DEFAULT_NOT_RUN,
    call_id: Callable[[Context[Any, Any]], str | None] = idempotency_key,
    require_key: bool = True,
    codec: ResultCodec[Any] | None = None,
    wait_seconds: float = 0.0,
    poll_seconds: float = 0.1,
    max_payload_bytes: int = TABLE.limits.default_max_payload_bytes,
    policy: CallPolicy | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Guard an MCP server tool so it runs at most once per idempotency key; put it under
    ``@server.tool()`` (see the module docstring).

    Args:
        store: A sync or async store (an async store needs an async tool).
        namespace: The binding's namespace.
        name: The binding's tool name (default: the function's ``__name__``).
        revision: The binding's tool revision.
        intent: The parameters that identify the effect (see
            :class:`~tool_execution_checkpoint.ToolGuard`); by default all of them.
        exclude: Parameters left out of the fingerprint, besides the ``Context``.
        not_run: The tool's exceptions raised before any effect (see
            :class:`~tool_execution_checkpoint.ToolGuard`; default ``ToolDidNotRun``):
            never stored, the next call with the same key runs the tool.
        call_id: The call id of a request's ``Context`` (default :func:`idempotency_key`);
            None means the client sent none. It always names the call: no ``tool_call``
            or ``call_scope`` around the server replaces it.
        require_key: Refuse a call without a key (default), or run it unguarded.
        codec: How the result is stored and rebuilt (default: :func:`result_codec` of the
            return annotation).
        wait_seconds: See :class:`~tool_execution_checkpoint.ToolGuard`.
        poll_seconds: See :class:`~tool_execution_checkpoint.ToolGuard`.
        max_payload_bytes: See :class:`~tool_execution_checkpoint.ToolGuard`.
        policy: The call options as one :class:`~tool_execution_checkpoint.CallPolicy`
            (``write_budget``, ``reconcile``, ...), or None; ``not_run`` and the three
            above are its fields (see :class:`~tool_execution_checkpoint.ToolGuard`).
            ``MCPError`` is added to its ``pass_through``.

    Raises:
        CheckpointError: INVALID_ARGUMENT, when decorating: an ``exclude`` or ``intent``
            name that is not a parameter, an ``intent`` name left out of the fingerprint
            (the ``Context``, an ``exclude`` name), an empty ``intent``, an async store
            with a sync tool, a tool annotated to return an
            ``InputRequiredResult``, a tool that has a parameter named
            :data:`CONTEXT_PARAMETER` that is not its ``Context``, or options
            :class:`~tool_execution_checkpoint.ToolGuard` refuses.
    """

    def decorate(tool: Callable[P, R]) -> Callable[P, R]:
        refuse_generator(tool)
        # Annotations resolved in the tool's module, Annotated[...] kept: the SDK reads
        # the tool's schema from the wrapper's signature.
        signature = inspect.signature(tool, eval_str=True)
        returns = signature.return_annotation
        returns = Any if returns is inspect.Signature.empty else returns
        problem = None
        chosen = None if intent is None else frozenset(intent)
        if set(exclude) - set(signature.parameters):
            problem = ("exclude", "names a parameter the tool does not have")
        elif chosen is not None and (not chosen or chosen - set(signature.parameters)):
            problem = ("intent", "is empty or names a parameter the tool does not have")
        elif _returns_input_required(returns):
            problem = ("tool", "returns an InputRequiredResult: ask through Resolve(...)")
        is_async = inspect.iscoroutinefunction(tool)
        if not is_async and inspect.iscoroutinefunction(getattr(store, "compare_and_swap", None)):
            problem = ("store", "is async and the tool is not: use a sync store")
        context_name = next(
            (p.name for p in signature.parameters.values() if _is_context(p.annotation)), None
        )
        added = context_name is None
        if added and CONTEXT_PARAMETER in signature.parameters:
            problem = ("tool", f"has a parameter named {CONTEXT_PARAMETER!r}")
        if chosen is not None and chosen & {context_name, *exclude}:
            problem = ("intent", "names the Context or an excluded parameter")
        if problem is not None:
            raise CheckpointError(ErrorCode.INVALID_ARGUMENT, problem[1], field=problem[0])
        context_name = context_name or CONTEXT_PARAMETER
        guard = ToolGuard(
            store,
            tool_name=name or tool.__name__,
            namespace=namespace,
            revision=revision,
            codec=_FinalResults(
                codec or result_codec(typing.get_type_hints(tool).get("return", Any))
            ),
            intent=chosen,
            policy=framework_policy(
                policy,
                control_flow=(MCPError,),
                not_run=not_run,
                wait_seconds=wait_seconds,
                poll_seconds=poll_seconds,
                max_payload_bytes=max_payload_bytes,
            ),
        )
        left_out = {context_name, *exclude}

        def prepare(kwargs: dict[str, Any]) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
            ctx = kwargs.pop(context_name) if added else kwargs.get(context_name)
            bound = signature.bind(**kwargs)
            bound.apply_defaults()
            identity = call_id(ctx) if isinstance(ctx, Context) else None
            if identity is None and require_key:
                raise MCPError(
                    INVALID_PARAMS,
                    f"this tool needs an idempotency key in _meta[{IDEMPOTENCY_KEY!r}]",
                    data={"missingMeta": IDEMPOTENCY_KEY},
                )
            arguments = {
                key: value for key, value in bound.arguments.items() if key not in left_out
            }
            return identity, arguments, kwargs

        make = guarded_tool_async if is_async else guarded_tool
        wrapper = make(guard, tool, prepare, _answer)
        _present_as(wrapper, tool, signature, add_context=added)
        wrapper.__checkpoint_guard__ = guard  # type: ignore[attr-defined]
        return cast(Callable[P, R], wrapper)

    return decorate


def _is_context(hint: object) -> bool:
    candidates = (hint, *typing.get_args(hint))
    return any(inspect.isclass(item) and issubclass(item, Context) for item in candidates)


def _present_as(
    wrapper: Callable[..., Any],
    tool: Callable[..., Any],
    signature: inspect.Signature,
    *,
    add_context: bool,
) -> None:
    """Give ``wrapper`` the tool's name, doc, signature and annotations, which the SDK
    reads the tool's schema and its ``Context`` parameter from; with ``add_context``, plus
    a keyword-only ``Context`` parameter."""
    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(wrapper, attribute, getattr(tool, attribute, None))
    parameters = list(signature.parameters.values())
    if add_context:
        context = inspect.Parameter(
            CONTEXT_PARAMETER, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Context
        )
        keyword_at = next(
            (i for i, p in enumerate(parameters) if p.kind is inspect.Parameter.VAR_KEYWORD),
            len(parameters),
        )
        parameters.insert(keyword_at, context)
    presented = signature.replace(parameters=parameters)
    annotations = {
        p.name: p.annotation for p in parameters if p.annotation is not inspect.Parameter.empty
    }
    if presented.return_annotation is not inspect.Signature.empty:
        annotations["return"] = presented.return_annotation
    wrapper.__signature__ = presented  # type: ignore[attr-defined]
    wrapper.__annotations__ = annotations
