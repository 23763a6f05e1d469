"""OpenTelemetry traces and metrics of the runner and the guard (the ``otel`` extra:
``opentelemetry-api``), and the stuck-calls gauge an operator registers.

What is emitted, and why, is docs/telemetry.md. In short: one span per call of
:func:`~.runner.run_once`, :func:`~.runner.run_once_async` or a guard (``tool_checkpoint.
run_once`` or ``tool_checkpoint.guard``), a child span per store operation it sends
(``tool_checkpoint.store.<operation>``), a counter of calls by outcome status
(``tool_checkpoint.calls``), a histogram of store operation latency
(``tool_checkpoint.store.duration``) and, registered by an operator,
:func:`register_stuck_calls_gauge` (``tool_checkpoint.calls.stuck``). The tracer and the
meter are the global providers' (``opentelemetry.trace.get_tracer`` and
``opentelemetry.metrics.get_meter``, scope ``tool_execution_checkpoint``): the
application configures an SDK, or gets the API's no-op.

**Cost.** ``opentelemetry`` is imported at the first call, once; without it installed
nothing of it is imported and each call costs a cached check (:func:`instruments` is
None). With the API but no SDK, the spans are the API's non-recording ones: the call's is
not made current and nothing is set on it.

**Never recorded.** A payload, an argument, a call id's value, a namespace, an
exception's message, a URL: the attributes are the store key (a SHA-256 digest), the tool
name, statuses and outcomes from fixed sets, the store's class name, and exception type
names. No exception is recorded on a span (its message may hold a secret).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from .errors import CheckpointError, ErrorCode
from .records import Binding
from .runner.vocabulary import Create, Get, Posted, RunOutcome, RunStatus, StoreFault, Swap
from .stores.listing import BrokenRecord, Listing
from .table import Status

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Counter, Histogram, Meter, ObservableGauge
    from opentelemetry.metrics import Observation as OtelObservation
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "STUCK_STATUSES",
    "CallTrace",
    "StoreOperation",
    "call_started",
    "guarding",
    "instruments",
    "register_stuck_calls_gauge",
    "stuck_counts",
]

SCOPE: Final = "tool_execution_checkpoint"
"""The instrumentation scope's name: the tracer's and the meter's."""

# attribute names
KEY: Final = "tool_checkpoint.key"
TOOL: Final = "tool_checkpoint.tool"
ENTRY: Final = "tool_checkpoint.entry"
STATUS: Final = "tool_checkpoint.status"
TOOL_RAN: Final = "tool_checkpoint.tool_ran"
ERROR_CODE: Final = "tool_checkpoint.error_code"
STORE: Final = "tool_checkpoint.store"
OPERATION: Final = "tool_checkpoint.operation"
OUTCOME: Final = "tool_checkpoint.outcome"
WRITES: Final = "tool_checkpoint.writes"
DURABLE: Final = "tool_checkpoint.durable"
ERROR_TYPE: Final = "error.type"

DURATION_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""The store latency histogram's bucket boundaries, in seconds (an advice to the SDK,
which a view may override): a local write takes well under a millisecond, a networked
one a few, a slow one a second."""

_FAILED: Final = frozenset(
    {
        RunStatus.STORE_UNAVAILABLE,
        RunStatus.NEEDS_EXECUTION_RECONCILIATION,
        RunStatus.NEEDS_DELIVERY_RECONCILIATION,
    }
)
"""The outcomes whose call span has the status ERROR: each leaves work to somebody."""

_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Instruments:
    """The tracer and the instruments of the runner and the guard, and the API modules
    their spans are made current with."""

    tracer: Tracer
    calls: Counter
    duration: Histogram
    trace: Any  # the module opentelemetry.trace
    context: Any  # the module opentelemetry.context


@functools.cache
def instruments() -> Instruments | None:
    """The instruments, made at the first call; None when ``opentelemetry`` cannot be
    imported (the ``otel`` extra is not installed), which is then never tried again."""
    try:
        from opentelemetry import context, metrics, trace  # noqa: PLC0415 - optional: the otel extra
    except ImportError:
        return None
    version = _version()
    meter = metrics.get_meter(SCOPE, version or "")
    return Instruments(
        tracer=trace.get_tracer(SCOPE, version),
        calls=meter.create_counter(
            "tool_checkpoint.calls",
            unit="{call}",
            description="Calls of run_once, run_once_async and guards, by outcome status.",
        ),
        duration=meter.create_histogram(
            "tool_checkpoint.store.duration",
            unit="s",
            description="How long each store operation of a call took, by store and operation.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        ),
        trace=trace,
        context=context,
    )


def _version() -> str | None:
    from importlib import metadata  # noqa: PLC0415 - read once, with the instruments

    try:
        return metadata.version("tool-execution-checkpoint")
    except metadata.PackageNotFoundError:
        return None


# --- which entry point a call came through -----------------------------------------------

_GUARDED: ContextVar[Binding | None] = ContextVar("tool_execution_checkpoint.guarded", default=None)
"""The binding of the guard call in progress in this context: the run_once call of that
very binding object is the guard's."""


class _Guarding:
    __slots__ = ("_binding", "_token")

    def __init__(self, binding: Binding) -> None:
        self._binding = binding

    def __enter__(self) -> None:
        self._token = _GUARDED.set(self._binding)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _GUARDED.reset(self._token)


_UNWATCHED: Final = contextlib.nullcontext()


def guarding(binding: Binding) -> AbstractContextManager[None]:
    """The guard's call of ``binding`` in progress: its run_once call's span is the
    guard's (``tool_checkpoint.guard``), one span, never two. A no-op without
    ``opentelemetry``."""
    return _UNWATCHED if instruments() is None else _Guarding(binding)


# --- one call ----------------------------------------------------------------------------


def call_started(binding: Binding, key: str, store: object) -> CallTrace | None:
    """Start the span of a call of ``binding`` under ``key`` on ``store`` and make it
    current, so the store operations, the tool's own spans and the delivery's are its
    children; None without ``opentelemetry``."""
    kit = instruments()
    if kit is None:
        return None
    entry = "guard" if _GUARDED.get() is binding else "run_once"
    tool = binding.tool_name
    span = kit.tracer.start_span(
        f"tool_checkpoint.{entry}",
        attributes={KEY: key, TOOL: tool, ENTRY: entry},
        record_exception=False,
        set_status_on_exception=False,
    )
    token = None
    if span.get_span_context().is_valid:  # the API's no-op span stays out of the context
        token = kit.context.attach(kit.trace.set_span_in_context(span))
    return CallTrace(kit, span, token, tool=tool, entry=entry, store=type(store).__name__)


class CallTrace:
    """One call's span, from :func:`call_started` to :meth:`finished` or
    :meth:`abandoned`, and the operations it sends (:meth:`operation`)."""

    __slots__ = ("_entry", "_kit", "_span", "_store", "_token", "_tool", "_writes")

    def __init__(
        self, kit: Instruments, span: Span, token: object, *, tool: str, entry: str, store: str
    ) -> None:
        self._kit, self._span, self._token = kit, span, token
        self._tool, self._entry, self._store = tool, entry, store
        self._writes = 0

    def operation(self, name: str, request: Create | Get | Swap) -> StoreOperation:
        """Start one store operation ``name`` (create, get, swap or post): its latency,
        and its span when the call's span is a real one (not the API's no-op)."""
        if name != "get":
            self._writes += 1
        if self._token is None:  # the call's span is the no-op: so would its child be
            return StoreOperation(self._kit, None, self._store, name)
        attributes: dict[str, str | bool] = {STORE: self._store, OPERATION: name}
        if isinstance(request, Swap):
            attributes[STATUS] = request.transition.next.status.value
            attributes[DURABLE] = request.durable
        elif isinstance(request, Create):
            attributes[STATUS] = request.record.status.value
        span = self._kit.tracer.start_span(
            f"tool_checkpoint.store.{name}",
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        return StoreOperation(self._kit, span, self._store, name)

    def finished(self, outcome: RunOutcome) -> None:
        """The call ended with ``outcome`` (also when the driver re-raises what the tool
        raised): its status, whether the tool ran; the span ends."""
        status = outcome.status
        self._end(status.value, outcome.ran_tool, status in _FAILED, {})

    def abandoned(self, error: BaseException | None, ran: bool) -> None:
        """The driver left without an outcome, raising ``error``: status ``refused``
        for a :class:`CheckpointError` (its code recorded, never its message), and
        ``abandoned`` for any other (a cancellation; its type's name recorded)."""
        extra: dict[str, str] = {}
        if isinstance(error, CheckpointError):
            status, extra[ERROR_CODE] = "refused", error.code.value
        else:
            status = "abandoned"
        if error is not None:
            extra[ERROR_TYPE] = _type_name(error)
        self._end(status, ran, True, extra)

    def _end(self, status: str, ran: bool, failed: bool, extra: dict[str, str]) -> None:
        kit, span = self._kit, self._span
        labels = {STATUS: status, TOOL: self._tool, ENTRY: self._entry}
        if ERROR_CODE in extra:  # a refusal's code, from a fixed set
            labels[ERROR_CODE] = extra[ERROR_CODE]
        kit.calls.add(1, labels)
        if span.is_recording():
            span.set_attributes({STATUS: status, TOOL_RAN: ran, WRITES: self._writes, **extra})
            if failed:
                span.set_status(kit.trace.StatusCode.ERROR, status)
        span.end()
        if self._token is not None:
            kit.context.detach(self._token)
            self._token = None


def _type_name(error: BaseException) -> str:
    kind = type(error)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _outcome(answer: object, name: str) -> str:
    """The store's answer as an outcome: applied, not-applied, unknown (a StoreFault:
    a write may or may not have landed), posted, found or absent."""
    if isinstance(answer, StoreFault):
        return "unknown"
    if isinstance(answer, Posted):
        return "posted"
    if name == "get":
        return "absent" if answer is None else "found"
    return "applied" if answer is True else "not-applied"


class StoreOperation:
    """One store operation's span and latency, from :meth:`CallTrace.operation` to
    :meth:`ended` or :meth:`raised`."""

    __slots__ = ("_began", "_kit", "_name", "_span", "_store", "_token")

    def __init__(self, kit: Instruments, span: Span | None, store: str, name: str) -> None:
        self._kit, self._span, self._store, self._name = kit, span, store, name
        self._token = None
        if span is not None and span.get_span_context().is_valid:  # a store's spans nest in it
            self._token = kit.context.attach(kit.trace.set_span_in_context(span))
        self._began = time.perf_counter()

    def ended(self, answer: object) -> None:
        """The store answered ``answer`` (the machine's answer: a StoreFault for a
        StoreError, Posted for a write sent unanswered)."""
        outcome = _outcome(answer, self._name)
        self._end(outcome, outcome == "unknown", None)

    def raised(self, error: BaseException) -> None:
        """The operation raised ``error``, which is no StoreError (a cancellation, a
        broken record): outcome ``raised``, its type's name recorded."""
        self._end("raised", True, _type_name(error))

    def _end(self, outcome: str, failed: bool, error_type: str | None) -> None:
        seconds = time.perf_counter() - self._began
        kit, span = self._kit, self._span
        kit.duration.record(seconds, {STORE: self._store, OPERATION: self._name, OUTCOME: outcome})
        if span is None:
            return
        if span.is_recording():
            span.set_attribute(OUTCOME, outcome)
            if error_type is not None:
                span.set_attribute(ERROR_TYPE, error_type)
            if failed:
                span.set_status(kit.trace.StatusCode.ERROR, outcome)
        span.end()
        if self._token is not None:
            kit.context.detach(self._token)
            self._token = None


# --- the stuck-calls gauge ---------------------------------------------------------------

STUCK_STATUSES: Final = (Status.EXECUTING, Status.UNCERTAIN, Status.DELIVERING)
"""The statuses of a call that waits for its worker or for an operator."""


def stuck_counts(store: Any, older_than_s: float) -> dict[str, int]:
    """How many records of ``store`` (an OperableCheckpointStore) are executing, uncertain
    or delivering and were last written at least ``older_than_s`` seconds ago on the
    store's clock, by status, and how many are ``broken`` (a stored value that is not a
    valid record, which every listing shows). Lists every page, as ``tool-checkpoint list
    --older-than`` does.

    Raises:
        CheckpointError: INVALID_ARGUMENT on ``older_than_s`` for a value that is not a
            finite number of at least 0.
        StoreError: the store's.
    """
    seconds = _threshold(older_than_s)
    counts = dict.fromkeys([status.value for status in STUCK_STATUSES] + ["broken"], 0)
    listing = Listing(
        STUCK_STATUSES, written_before_us=store.clock_us() - int(seconds * 1e6), limit=1_000
    )
    while page := store.list_records(listing):
        for line in page:
            counts["broken" if isinstance(line, BrokenRecord) else line.status.value] += 1
        listing = listing.after(page[-1].key)
    return counts


def _threshold(older_than_s: object) -> float:
    if (
        isinstance(older_than_s, bool)
        or not isinstance(older_than_s, int | float)
        or not math.isfinite(older_than_s)
        or older_than_s < 0
    ):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "must be a finite number of at least 0",
            field="older_than_s",
        )
    return float(older_than_s)


def register_stuck_calls_gauge(
    store: Any, *, older_than_s: float = 900.0, meter: Meter | None = None
) -> ObservableGauge:
    """Register ``tool_checkpoint.calls.stuck`` on ``meter`` (default: the global meter
    provider's, scope ``tool_execution_checkpoint``): an observable gauge whose callback,
    at each collection, observes :func:`stuck_counts` of ``store`` (a sync
    OperableCheckpointStore), one point per status (``executing``, ``uncertain``,
    ``delivering``, ``broken``) with the store's class name. The default threshold is
    :data:`~.operations.DEFAULT_MIN_AGE_US`, 15 minutes: the age from which an operator
    may settle the call.

    Each collection lists the store (a page of 1,000 records at a time): on a large
    store, collect it less often than the call metrics (a reader of its own). A store
    error at collection is logged at WARNING (its type only) and the collection
    observes nothing.

    Raises:
        CheckpointError: INVALID_ARGUMENT on ``older_than_s`` (see :func:`stuck_counts`),
            on ``store`` for one without ``list_records`` and ``clock_us``, and on
            ``meter`` when none is given and ``opentelemetry`` is not installed.
    """
    seconds = _threshold(older_than_s)
    methods = (getattr(store, name, None) for name in ("list_records", "clock_us"))
    if not all(callable(method) for method in methods):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "must be an OperableCheckpointStore (list_records and clock_us)",
            field="store",
        )
    try:
        from opentelemetry.metrics import Observation, get_meter  # noqa: PLC0415 - optional
    except ImportError:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "needs opentelemetry-api: install the otel extra",
            field="meter",
        ) from None
    used = meter if meter is not None else get_meter(SCOPE, _version() or "")
    kind = type(store).__name__

    def observe(_options: CallbackOptions) -> Iterable[OtelObservation]:
        try:
            counts = stuck_counts(store, seconds)
        except Exception as error:  # the SDK would log the message: only the type here
            _logger.warning("the stuck-calls gauge could not list %s: %s", kind, _type_name(error))
            return []
        return [Observation(n, {STATUS: status, STORE: kind}) for status, n in counts.items()]

    return used.create_observable_gauge(
        "tool_checkpoint.calls.stuck",
        callbacks=[observe],
        unit="{call}",
        description="Calls executing, uncertain or delivering for longer than a threshold.",
    )
