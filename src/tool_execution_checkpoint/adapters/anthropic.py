"""The anthropic SDK: guard the functions its tool runners call (extra ``anthropic``).

::

    @beta_tool
    @checkpointed_tool(store, intent=("to",))
    def send_email(to: str, body: str) -> str: ...

Guard the tools with effects; a read-only tool stays a plain ``@beta_tool``. Why each
choice, with the facts from anthropic 2.16.0: ``docs/frameworks.md``.

**The call id** comes from what the host names, innermost first (the runners pass a tool
its input only): a :func:`~tool_execution_checkpoint.tool_call` block, a
:func:`~tool_execution_checkpoint.call_scope` block, else the session event:

- **Sessions tool runner** (``client.beta.sessions.events.tool_runner``): the call id is
  ``<session id>/<event id>`` of the ``agent.custom_tool_use`` event, read off the tool
  run's span: make the runner from :func:`session_client`'s copy of the client. A host
  that dies after the effect, or one that attaches later, is dispatched the same event
  and gets the stored result; two events are two calls.
- **Messages API** (``client.beta.messages.tool_runner``, sync, async or
  ``stream=True``, or a hand-written loop): the host names the turn,
  ``with call_scope("conv-42/turn-7"):`` around each attempt of the turn, the same name
  on every attempt. Each call is numbered per intent in the scope.

What the host and the model see:

- No call id (no block, no session event): :class:`CallNotNamed`, a ``BaseException``
  that passes the runners' ``except Exception``, so the host's turn or runner fails (the
  Sessions runner raises it in a ``BaseExceptionGroup``). Nothing ran; nothing is
  posted to the model.
- A call the guard cannot answer (:class:`~tool_execution_checkpoint.CallNotAnswered`) or
  refuses (:class:`~tool_execution_checkpoint.CheckpointError`): the model gets the SDK's
  :class:`~anthropic.lib.tools.ToolError` with a fixed text that names the status or code
  and tells it not to call the tool again for the request (never an argument, a payload
  or an id). In a ``call_scope`` the model's retry is the same call again, and leaving
  the block raises the first refusal, so the host's turn fails.
- Anything else the tool raises is the tool's own answer (stored; a replay raises
  :class:`~tool_execution_checkpoint.ToolRaisedEarlier`), except the ``not_run=`` types:
  an error raised before any effect is not stored, and the model's retry runs the tool.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

from anthropic import AsyncAnthropic
from anthropic.lib.tools import ToolError
from anthropic.lib.tools._tool_dispatch import current_session_thread
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.util import types as otel_types

from ..errors import CheckpointError, ErrorCode
from ..guard import CallNotAnswered, checkpointed
from ..guard_base import GUARD_REFUSALS
from ..guard_calls import answered
from ..guard_calls_async import answered_async
from ..runner import CallPolicy
from ..stores.core import AsyncCheckpointStore, CheckpointStore

__all__ = ["CallNotNamed", "checkpointed_tool", "session_client"]

F = TypeVar("F", bound=Callable[..., Any])

# The attributes of the span the pinned Sessions runner starts around each tool run.
_OPERATION, _EXECUTE_TOOL = "gen_ai.operation.name", "execute_tool"
_EVENT_ID, _SESSION_ID = "gen_ai.tool.call.id", "anthropic.session.id"


class CallNotNamed(BaseException):
    """A guarded tool was called with nothing naming the call: no ``tool_call`` or
    ``call_scope`` block and no session event. Nothing ran. A ``BaseException``, so that
    a runner that turns every ``Exception`` into a result for the model lets it through
    to the host.

    Attributes:
        error: The refusal, CheckpointError INVALID_ARGUMENT on the field ``call_id``.
    """

    def __init__(self, detail: str) -> None:
        self.error = CheckpointError(ErrorCode.INVALID_ARGUMENT, detail, field="call_id")
        super().__init__(str(self.error))


# --- the session event of the running call ------------------------------------------------


class _ToolRunSpan(trace.Span):
    """The span of one tool run, as the application's tracer made it, with its event."""

    def __init__(self, span: trace.Span, call_id: str) -> None:
        self.span = span
        self.call_id = call_id

    def end(self, end_time: int | None = None) -> None:
        self.span.end(end_time)

    def get_span_context(self) -> trace.SpanContext:
        return self.span.get_span_context()

    def set_attributes(self, attributes: Mapping[str, otel_types.AnyValue]) -> None:
        self.span.set_attributes(attributes)

    def set_attribute(self, key: str, value: otel_types.AnyValue) -> None:
        self.span.set_attribute(key, value)

    def add_event(
        self, name: str, attributes: otel_types.Attributes = None, timestamp: int | None = None
    ) -> None:
        self.span.add_event(name, attributes, timestamp)

    def add_link(
        self, context: trace.SpanContext, attributes: otel_types.Attributes = None
    ) -> None:
        self.span.add_link(context, attributes)

    def update_name(self, name: str) -> None:
        self.span.update_name(name)

    def is_recording(self) -> bool:
        return self.span.is_recording()

    def set_status(
        self, status: trace.Status | trace.StatusCode, description: str | None = None
    ) -> None:
        self.span.set_status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: otel_types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        self.span.record_exception(exception, attributes, timestamp, escaped)


class _Tracer(trace.Tracer):
    """The application's tracer; a Sessions tool run's span is marked with its event."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def start_span(  # noqa: PLR0917 - OpenTelemetry's signature
        self,
        name: str,
        context: otel_context.Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        attributes: otel_types.Attributes = None,
        links: Sequence[trace.Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        span = self.tracer.start_span(
            name,
            context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        found = attributes or {}
        session, event = found.get(_SESSION_ID), found.get(_EVENT_ID)
        if found.get(_OPERATION) == _EXECUTE_TOOL and isinstance(session, str) and event:
            return _ToolRunSpan(span, f"{session}/{event}")
        return span

    # The SDK starts its spans with start_span; this one only passes through (as
    # OpenTelemetry's own ProxyTracer does, whose override mypy refuses the same way).
    def start_as_current_span(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> Iterator[trace.Span]:
        return cast(Iterator[trace.Span], self.tracer.start_as_current_span(*args, **kwargs))


class _TracerProvider(trace.TracerProvider):
    """The application's tracer provider, whose tracers are :class:`_Tracer`."""

    def __init__(self, provider: trace.TracerProvider) -> None:
        self.provider = provider

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _Tracer(self.provider.get_tracer(*args, **kwargs))


def session_client(client: AsyncAnthropic) -> AsyncAnthropic:
    """A copy of ``client`` whose Sessions tool runner names each guarded call by its
    session event (see the module docstring): make the runner from it. Its spans go where
    ``client``'s went (none when its traces were off), with the same content mode."""
    options = client.open_telemetry
    traces = options["traces"]
    own = options.get("tracer_provider") or trace.get_tracer_provider()
    provider = _TracerProvider(own if traces["enabled"] else trace.NoOpTracerProvider())
    return client.with_options(
        open_telemetry={
            **options,
            "tracer_provider": provider,
            "traces": {**traces, "enabled": True},
        }
    )


def _session_call_id(_bound: inspect.BoundArguments) -> str | None:
    """The framework id of this call: ``<session id>/<event id>`` in a Sessions runner
    made from :func:`session_client`, else None."""
    span = trace.get_current_span()
    return span.call_id if isinstance(span, _ToolRunSpan) else None


def _not_named() -> CallNotNamed:
    if current_session_thread.get() is not None:
        return CallNotNamed(
            "is unknown in the Sessions tool runner: make the runner from "
            "session_client(client), or call the tool inside `with tool_call(call_id):`"
        )
    return CallNotNamed(
        "is missing: run a Messages turn inside `with call_scope(turn_id):`, or the "
        "Sessions tool runner made from session_client(client)"
    )


# --- the guard ----------------------------------------------------------------------------

_NOT_AGAIN = (
    "Do not call this tool again for this request: its effect may already have happened. "
    "Tell the user it needs checking."
)


def _refused(refusal: Exception) -> BaseException:
    """What a refused call raises: :class:`CallNotNamed` for the guard's refusal of a call
    with no id (INVALID_ARGUMENT on ``call_id``, see ``identity.claim_identity``); else a
    ``ToolError`` whose text names the status or code, never a value."""
    if isinstance(refusal, CallNotAnswered):
        return ToolError(
            f"The tool call was not answered ({refusal.outcome.status.value}). {_NOT_AGAIN}"
        )
    error = cast(CheckpointError, refusal)
    if error.code is ErrorCode.INVALID_ARGUMENT and error.field == "call_id":
        return _not_named()
    return ToolError(f"The tool call was refused ({error.code.value}). {_NOT_AGAIN}")


def _for_the_model(guarded: Callable[..., Any]) -> Callable[..., Any]:
    """``guarded`` with each refusal raised as :func:`_refused` says, outside the
    ``except``, so that its chain keeps nothing of the refusal."""
    wrap = answered_async if inspect.iscoroutinefunction(guarded) else answered
    return wrap(guarded, GUARD_REFUSALS, _refused)


def checkpointed_tool(
    store: CheckpointStore | AsyncCheckpointStore,
    *,
    name: str | None = None,
    namespace: str = "anthropic",
    revision: str = "1",
    policy: CallPolicy | None = None,
    **options: Any,
) -> Callable[[F], F]:
    """:func:`~tool_execution_checkpoint.checkpointed` for the SDK's runners: the call id
    as the module docstring says, and refusals worded for the model. Put it under
    ``@beta_tool`` (or ``@beta_async_tool``) and give it the same ``name`` if you give
    ``beta_tool`` one. ``policy`` (a :class:`~tool_execution_checkpoint.CallPolicy`: a
    ``write_budget``, a ``reconcile`` hook, ...) and ``options`` are checkpointed's
    (``intent=``, ``not_run=``, ...).

    The decorated tool returns what checkpointed's returns, and raises what it raises,
    except: :class:`CallNotNamed` for a call nothing names; ``ToolError`` for a
    ``CallNotAnswered`` or a ``CheckpointError`` of the call.

    Raises:
        CheckpointError: as checkpointed, when decorating.
    """

    def decorate(tool: F) -> F:
        guard = checkpointed(
            store,
            namespace=namespace,
            name=name or tool.__name__,
            revision=revision,
            call_id=_session_call_id,
            policy=policy,
            **options,
        )
        return cast(F, _for_the_model(guard(tool)))

    return decorate
