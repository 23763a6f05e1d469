"""OpenTelemetry: the spans and metrics of run_once, run_once_async and the guard, read
with the SDK's in-memory exporter and reader; no secret reaches any of them; the
stuck-calls gauge; and without opentelemetry installed, nothing of it is imported."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tool_execution_checkpoint import (
    Binding,
    CallStoreUnavailable,
    CheckpointError,
    ErrorCode,
    MemoryStore,
    SQLiteStore,
    StoreError,
    ToolGuard,
    checkpoint_key,
    claim_execution,
    create_checkpoint,
    open_store,
    telemetry,
)
from tool_execution_checkpoint.runner import DeliveryNotSent, RunStatus, run_once, run_once_async

SECRET = "OTEL-SECRET-7f3e"
"""Planted in payloads, arguments, call ids, namespaces, exception messages and a store
URL's password: no exported span or metric may hold it."""

AT = "2026-12-07T00:00:00Z"

SPANS = InMemorySpanExporter()
_DELTA = AggregationTemporality.DELTA
READER = InMemoryMetricReader(preferred_temporality={Counter: _DELTA, Histogram: _DELTA})


def _install() -> None:
    """The SDK as the global providers, once per process (the API allows one)."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(SPANS))
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))
    assert trace.get_tracer_provider() is tracer_provider, "another test set the providers"


_install()


@pytest.fixture(autouse=True)
def fresh() -> None:
    """Each test reads only what it made: spans cleared, delta metrics drained."""
    SPANS.clear()
    READER.get_metrics_data()


# --- reading what was exported -------------------------------------------------------------


def spans(name: str | None = None) -> list[ReadableSpan]:
    return [s for s in SPANS.get_finished_spans() if name is None or s.name == name]


def call_span() -> ReadableSpan:
    (found,) = [
        s for s in spans() if s.name in {"tool_checkpoint.run_once", "tool_checkpoint.guard"}
    ]
    return found


def children(parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        s for s in spans() if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def points(data: Any, name: str) -> list[tuple[dict[str, Any], Any]]:
    """The (attributes, point) of metric ``name`` in collected ``data``."""
    found = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found += [(dict(p.attributes), p) for p in metric.data.data_points]
    return found


def exported_text(span_list: list[ReadableSpan], data: Any) -> list[str]:
    """Every text of the spans and metrics exported: names, attribute keys and values,
    events and their attributes, statuses, links, metric names, units, descriptions,
    data point attributes and exemplars."""
    texts: list[str] = []

    def attributes(found: Any) -> None:
        for key, value in dict(found or {}).items():
            texts.extend([key, json.dumps(value, default=str)])

    for span in span_list:
        texts.append(span.name)
        attributes(span.attributes)
        texts.append(str(span.status.description))
        for event in span.events:
            texts.append(event.name)
            attributes(event.attributes)
        for link in span.links:
            attributes(link.attributes)
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                texts += [metric.name, metric.unit or "", metric.description or ""]
                for point in metric.data.data_points:
                    attributes(point.attributes)
                    for exemplar in getattr(point, "exemplars", None) or ():
                        attributes(exemplar.filtered_attributes)
    return texts


def leaked(marker: str = SECRET) -> list[str]:
    """The exported texts that hold ``marker`` (this test's spans and metrics)."""
    return [t for t in exported_text(spans(), READER.get_metrics_data()) if marker in t]


# --- the parts of a call -----------------------------------------------------------------


def binding(call_id: str = f"call-{SECRET}", revision: str = "1") -> Binding:
    return Binding(f"ns-{SECRET}", call_id, "send_email", revision, "sha256:00")


def tool() -> dict[str, str]:
    return {"messageId": "m-1", "note": SECRET}


class Inbox:
    def __init__(self, not_sent: int = 0) -> None:
        self.received: list[Any] = []
        self.not_sent = not_sent

    def __call__(self, payload: Any) -> None:
        if self.not_sent:
            self.not_sent -= 1
            raise DeliveryNotSent()
        self.received.append(payload)


class BrokenStore(MemoryStore):
    """Every operation fails (a StoreError whose message holds the secret)."""

    def _down(self, *_: Any, **__: Any) -> Any:
        raise StoreError(f"down: {SECRET}")

    create_if_absent = get = compare_and_swap = _down


def run(store: Any, b: Binding, deliver: Any, *, asynchronous: bool) -> Any:
    if asynchronous:
        return asyncio.run(run_once_async(store, b, tool, deliver, write_budget=0))
    return run_once(store, b, tool, deliver, write_budget=0)


# --- run_once ------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_executed_call_has_a_span_with_its_store_writes_and_is_counted(
    asynchronous: bool,
) -> None:
    store, b = MemoryStore(), binding()
    outcome = run(store, b, Inbox(), asynchronous=asynchronous)
    assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    span = call_span()
    assert span.name == "tool_checkpoint.run_once"
    assert span.attributes is not None
    assert dict(span.attributes) == {
        "tool_checkpoint.key": checkpoint_key(b),
        "tool_checkpoint.tool": "send_email",
        "tool_checkpoint.entry": "run_once",
        "tool_checkpoint.status": "executed-and-delivered",
        "tool_checkpoint.tool_ran": True,
        "tool_checkpoint.writes": len(children(span)),
    }
    assert span.status.is_unset
    operations = [
        (s.name, dict(s.attributes or {})["tool_checkpoint.outcome"]) for s in children(span)
    ]
    assert operations[0] == ("tool_checkpoint.store.create", "applied")
    assert all(outcome == "applied" for _, outcome in operations)
    assert {name for name, _ in operations} <= {
        "tool_checkpoint.store.create",
        "tool_checkpoint.store.swap",
    }
    data = READER.get_metrics_data()
    assert [(a, p.value) for a, p in points(data, "tool_checkpoint.calls")] == [
        (
            {
                "tool_checkpoint.status": "executed-and-delivered",
                "tool_checkpoint.tool": "send_email",
                "tool_checkpoint.entry": "run_once",
            },
            1,
        )
    ]
    durations = points(data, "tool_checkpoint.store.duration")
    assert {a["tool_checkpoint.store"] for a, _ in durations} == {"MemoryStore"}
    assert sum(p.count for _, p in durations) == len(operations)
    assert {a["tool_checkpoint.operation"] for a, _ in durations} <= {"create", "swap"}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_replays_are_counted_by_status_and_say_the_tool_did_not_run(asynchronous: bool) -> None:
    store, b = MemoryStore(), binding()
    first = run(store, b, Inbox(not_sent=1), asynchronous=asynchronous)
    assert first.status is RunStatus.DELIVERY_FAILED
    again = run(store, b, Inbox(), asynchronous=asynchronous)
    assert again.status is RunStatus.DELIVERED_STORED_RESULT
    last = run(store, b, Inbox(), asynchronous=asynchronous)
    assert last.status is RunStatus.ALREADY_DELIVERED
    calls = spans("tool_checkpoint.run_once")
    assert [dict(s.attributes or {})["tool_checkpoint.status"] for s in calls] == [
        "delivery-failed",
        "delivered-stored-result",
        "already-delivered",
    ]
    assert [dict(s.attributes or {})["tool_checkpoint.tool_ran"] for s in calls] == [
        True,
        False,
        False,
    ]
    reads = [dict(s.attributes or {}) for s in children(calls[2])]
    assert reads[0]["tool_checkpoint.operation"] == "create"
    assert reads[0]["tool_checkpoint.outcome"] == "not-applied"  # a record is there
    counted = {
        a["tool_checkpoint.status"]: p.value
        for a, p in points(READER.get_metrics_data(), "tool_checkpoint.calls")
    }
    assert counted == {"delivery-failed": 1, "delivered-stored-result": 1, "already-delivered": 1}
    assert leaked() == []


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_binding_conflict_is_a_refused_call_with_its_code_only(asynchronous: bool) -> None:
    store = MemoryStore()
    run(store, binding(), Inbox(), asynchronous=asynchronous)
    SPANS.clear()
    READER.get_metrics_data()
    other = binding(revision="2")
    with pytest.raises(CheckpointError) as refused:
        run(store, other, Inbox(), asynchronous=asynchronous)
    assert refused.value.code is ErrorCode.BINDING_CONFLICT
    span = call_span()
    attributes = dict(span.attributes or {})
    assert attributes["tool_checkpoint.status"] == "refused"
    assert attributes["tool_checkpoint.error_code"] == "BINDING_CONFLICT"
    assert attributes["error.type"] == "tool_execution_checkpoint.errors.CheckpointError"
    assert attributes["tool_checkpoint.tool_ran"] is False
    assert span.status.status_code is StatusCode.ERROR
    assert span.events == ()  # no exception recorded: its message is never exported
    counted = points(READER.get_metrics_data(), "tool_checkpoint.calls")
    assert [a for a, _ in counted] == [
        {
            "tool_checkpoint.status": "refused",
            "tool_checkpoint.error_code": "BINDING_CONFLICT",
            "tool_checkpoint.tool": "send_email",
            "tool_checkpoint.entry": "run_once",
        }
    ]
    assert leaked() == []


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_store_fault_is_an_unknown_operation_and_a_store_unavailable_call(
    asynchronous: bool,
) -> None:
    outcome = run(BrokenStore(), binding(), Inbox(), asynchronous=asynchronous)
    assert outcome.status is RunStatus.STORE_UNAVAILABLE
    span = call_span()
    assert dict(span.attributes or {})["tool_checkpoint.status"] == "store-unavailable"
    assert span.status.status_code is StatusCode.ERROR
    operations = children(span)
    assert operations
    assert {dict(s.attributes or {})["tool_checkpoint.outcome"] for s in operations} == {"unknown"}
    durations = points(READER.get_metrics_data(), "tool_checkpoint.store.duration")
    assert {(a["tool_checkpoint.store"], a["tool_checkpoint.outcome"]) for a, _ in durations} == {
        ("BrokenStore", "unknown")
    }
    assert leaked() == []


# --- the guard -----------------------------------------------------------------------------


def guard(store: Any, revision: str = "1") -> ToolGuard:
    return ToolGuard(store, "send_email", namespace=f"ns-{SECRET}", revision=revision)


def guarded_call(g: ToolGuard, *, asynchronous: bool) -> Any:
    arguments = {"to": f"{SECRET}@example.com", "body": SECRET}
    if asynchronous:

        async def send() -> dict[str, str]:
            return tool()

        return asyncio.run(g.call_async(f"call-{SECRET}", arguments, send))
    return g.call(f"call-{SECRET}", arguments, tool)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_guarded_call_is_one_guard_span_executed_then_replayed(asynchronous: bool) -> None:
    store = MemoryStore()
    g = guard(store)
    assert guarded_call(g, asynchronous=asynchronous) == tool()
    assert guarded_call(g, asynchronous=asynchronous) == tool()
    assert spans("tool_checkpoint.run_once") == []  # one span per guarded call, never two
    first, replay = spans("tool_checkpoint.guard")
    for span, status, ran in (
        (first, "executed-and-delivered", True),
        (replay, "already-delivered", False),
    ):
        attributes = dict(span.attributes or {})
        assert attributes["tool_checkpoint.entry"] == "guard"
        assert attributes["tool_checkpoint.status"] == status
        assert attributes["tool_checkpoint.tool_ran"] is ran
        assert attributes["tool_checkpoint.tool"] == "send_email"
        assert str(attributes["tool_checkpoint.key"]).startswith("tec1-")
        assert children(span)
    counted = {
        (a["tool_checkpoint.entry"], a["tool_checkpoint.status"]): p.value
        for a, p in points(READER.get_metrics_data(), "tool_checkpoint.calls")
    }
    assert counted == {("guard", "executed-and-delivered"): 1, ("guard", "already-delivered"): 1}
    assert leaked() == []


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_guarded_binding_conflict_and_store_fault_are_counted(asynchronous: bool) -> None:
    store = MemoryStore()
    guarded_call(guard(store), asynchronous=asynchronous)
    with pytest.raises(CheckpointError) as refused:
        guarded_call(guard(store, revision="2"), asynchronous=asynchronous)
    assert refused.value.code is ErrorCode.BINDING_CONFLICT
    with pytest.raises(CallStoreUnavailable):
        guarded_call(
            ToolGuard(BrokenStore(), "send_email", namespace=f"ns-{SECRET}", write_budget=0),
            asynchronous=asynchronous,
        )
    statuses = [
        dict(s.attributes or {})["tool_checkpoint.status"] for s in spans("tool_checkpoint.guard")
    ]
    assert statuses == ["executed-and-delivered", "refused", "store-unavailable"]
    counted = {
        a["tool_checkpoint.status"]: p.value
        for a, p in points(READER.get_metrics_data(), "tool_checkpoint.calls")
    }
    assert counted == {"executed-and-delivered": 1, "refused": 1, "store-unavailable": 1}
    assert leaked() == []


def test_the_tools_own_spans_and_a_run_once_inside_it_are_children_of_the_call() -> None:
    tracer = trace.get_tracer("a-tool")
    store = MemoryStore()

    def sends() -> dict[str, str]:
        with tracer.start_as_current_span("http POST"):
            pass
        run_once(store, binding(call_id="inner"), tool, Inbox())
        return tool()

    guard(store).call("outer", {"to": "x"}, sends)
    outer = call_span_named("tool_checkpoint.guard")
    names = {s.name for s in children(outer)}
    assert {"http POST", "tool_checkpoint.run_once"} <= names
    inner = call_span_named("tool_checkpoint.run_once")
    assert dict(inner.attributes or {})["tool_checkpoint.entry"] == "run_once"


def call_span_named(name: str) -> ReadableSpan:
    (found,) = spans(name)
    return found


# --- no secret reaches telemetry -------------------------------------------------------------


def test_no_secret_of_a_url_reaches_telemetry() -> None:
    """A Redis store opened from a URL with the secret as its password (nothing listens
    on port 9: every operation fails), through run_once and the guard."""
    store = open_store(f"redis://:{SECRET}@127.0.0.1:9/0", prefix="otel:")
    try:
        outcome = run_once(store, binding(), tool, Inbox(), write_budget=0)
        assert outcome.status is RunStatus.STORE_UNAVAILABLE
        with pytest.raises(CallStoreUnavailable):
            guarded_call(
                ToolGuard(store, "send_email", namespace=f"ns-{SECRET}", write_budget=0),
                asynchronous=False,
            )
    finally:
        store.close()
    assert len(spans("tool_checkpoint.store.create")) >= 2
    assert leaked() == []
    assert leaked("9/0") == []
    assert leaked("RedisStore")  # the store's class name is there: the scan reads it


def test_the_scan_catches_a_leaky_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    """A span attribute and a metric attribute holding a payload: the scan finds both,
    so a leak in the telemetry would fail the tests above."""
    finished = telemetry.CallTrace.finished

    def leaky(self: telemetry.CallTrace, outcome: Any) -> None:
        self._span.set_attribute("tool_checkpoint.payload", json.dumps(outcome.payload))
        self._kit.calls.add(1, {"tool_checkpoint.payload": json.dumps(outcome.payload)})
        finished(self, outcome)

    monkeypatch.setattr(telemetry.CallTrace, "finished", leaky)
    run_once(MemoryStore(), binding(call_id="plain"), tool, Inbox())
    data = READER.get_metrics_data()
    assert [t for t in exported_text(spans(), None) if SECRET in t]
    assert [t for t in exported_text([], data) if SECRET in t]


# --- the stuck-calls gauge ---------------------------------------------------------------


def stuck_record(store: Any, call_id: str) -> None:
    """A call claimed at ``AT`` whose worker never came back: executing ever since."""
    ready = create_checkpoint(binding(call_id=call_id), created_at=AT)
    key = checkpoint_key(ready.binding)
    assert store.create_if_absent(key, ready)
    claim = claim_execution(ready, attempt_id="worker.1", at=AT)
    assert store.compare_and_swap(key, claim.expected_revision, claim.next)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_the_stuck_calls_gauge_counts_a_stuck_record(kind: str, tmp_path: Path) -> None:
    store: Any = MemoryStore() if kind == "memory" else SQLiteStore(str(tmp_path / "c.db"))
    stuck_record(store, f"stuck-{SECRET}")
    run_once(store, binding(call_id="done"), tool, Inbox())  # delivered: not stuck
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("operator")
    telemetry.register_stuck_calls_gauge(store, older_than_s=3600, meter=meter)
    observed = {
        a["tool_checkpoint.status"]: p.value
        for a, p in points(reader.get_metrics_data(), "tool_checkpoint.calls.stuck")
    }
    assert observed == {"executing": 1, "uncertain": 0, "delivering": 0, "broken": 0}
    assert telemetry.stuck_counts(store, 10 * 365 * 86400)["executing"] == 0  # younger
    text = exported_text([], reader.get_metrics_data())
    assert [t for t in text if SECRET in t] == []
    assert f"{type(store).__name__}" in json.dumps(text)


def test_the_gauge_refuses_a_bad_threshold_or_store_and_survives_a_failing_one() -> None:
    for bad in (-1, float("nan"), True, "1h"):
        with pytest.raises(CheckpointError) as refused:
            telemetry.register_stuck_calls_gauge(MemoryStore(), older_than_s=bad)  # type: ignore[arg-type]
        assert refused.value.field == "older_than_s"
    with pytest.raises(CheckpointError) as refused:
        telemetry.register_stuck_calls_gauge(object())
    assert refused.value.field == "store"

    class Down(MemoryStore):
        def list_records(self, _listing: Any) -> Any:
            raise StoreError(f"down: {SECRET}")

    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("operator")
    telemetry.register_stuck_calls_gauge(Down(), meter=meter)
    assert points(reader.get_metrics_data(), "tool_checkpoint.calls.stuck") == []


# --- without the extra, and without an SDK ---------------------------------------------------

BLOCKER = """
import sys

class NoOpenTelemetry:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoOpenTelemetry())
"""

WITHOUT = """
import asyncio
from tool_execution_checkpoint import Binding, MemoryStore, ToolGuard, run_once, run_once_async
from tool_execution_checkpoint import telemetry
from tool_execution_checkpoint.runner import RunStatus

store = MemoryStore()
b = Binding("ns", "call-1", "send_email", "1", "sha256:00")
sent = []
assert run_once(store, b, lambda: 1, sent.append).status is RunStatus.EXECUTED_AND_DELIVERED
b2 = Binding("ns", "call-2", "send_email", "1", "sha256:00")
outcome = asyncio.run(run_once_async(store, b2, lambda: 2, sent.append))
assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
guard = ToolGuard(store, "send_email")
assert guard.call("call-3", {"to": "x"}, lambda: 3) == 3
assert asyncio.run(guard.call_async("call-4", {"to": "x"}, lambda: 4)) == 4
assert sent == [1, 2]
assert telemetry.instruments() is None
assert telemetry.instruments.cache_info().misses == 1  # tried once, then a cached answer
try:
    telemetry.register_stuck_calls_gauge(store)
except Exception as error:
    assert error.field == "meter", error
else:
    raise AssertionError("the gauge needs opentelemetry or a meter")
assert not [name for name in sys.modules if name.split(".")[0] == "opentelemetry"]
print("ok")
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_opentelemetry_nothing_of_it_is_imported_and_calls_work() -> None:
    run = _python(BLOCKER + WITHOUT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_the_blocker_does_block() -> None:
    """The test above would fail if opentelemetry were imported: the same script without
    the blocker, where the API is installed, fails its last checks."""
    run = _python("import sys\n" + WITHOUT)
    assert run.returncode != 0
    assert "AssertionError" in run.stderr


def test_with_the_api_and_no_sdk_the_spans_are_the_apis_no_op() -> None:
    code = textwrap.dedent(
        """
        from opentelemetry import context, trace
        from tool_execution_checkpoint import Binding, MemoryStore, run_once, telemetry
        from tool_execution_checkpoint.runner import RunStatus

        b = Binding("ns", "call-1", "send_email", "1", "sha256:00")
        seen = []

        def tool():
            seen.append(trace.get_current_span())
            return 1

        before = context.get_current()
        assert run_once(MemoryStore(), b, tool, print).status is RunStatus.EXECUTED_AND_DELIVERED
        assert seen == [trace.INVALID_SPAN]  # no span made current: the no-op's
        assert context.get_current() == before
        started = telemetry.call_started(b, "key", MemoryStore())
        assert started is not None and not started._span.is_recording()
        print("ok")
        """
    )
    run = _python(code)
    assert run.returncode == 0, run.stderr


class SlowCreate(MemoryStore):
    """An async store whose create waits long enough to be cancelled."""

    async def create_if_absent(self, key: str, record: Any) -> bool:  # type: ignore[override]
        await asyncio.sleep(60)
        return super().create_if_absent(key, record)

    async def get(self, key: str) -> Any:  # type: ignore[override]
        return super().get(key)

    async def compare_and_swap(  # type: ignore[override]
        self, key: str, expected: int, record: Any, *, durable: bool = True
    ) -> bool:
        return super().compare_and_swap(key, expected, record, durable=durable)


@pytest.mark.parametrize("where", ["tool", "store"])
def test_a_cancelled_call_ends_its_spans_and_leaves_the_context_as_it_was(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def slow() -> None:
        await asyncio.sleep(60)

    async def scenario() -> None:
        store: Any = SlowCreate() if where == "store" else MemoryStore()
        before = trace.get_current_span()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await run_once_async(store, binding(), slow, Inbox())
        assert trace.get_current_span() is before

    asyncio.run(scenario())
    span = call_span()
    attributes = dict(span.attributes or {})
    if where == "tool":  # marked uncertain, then the cancellation re-raised
        assert attributes["tool_checkpoint.status"] == "needs-execution-reconciliation"
        assert attributes["tool_checkpoint.tool_ran"] is True
    else:  # the create was cancelled: read back, then the cancellation propagates
        assert attributes["tool_checkpoint.status"] == "abandoned"
        assert attributes["error.type"] == "asyncio.exceptions.CancelledError"
        create = spans("tool_checkpoint.store.create")[0]
        assert dict(create.attributes or {})["tool_checkpoint.outcome"] == "raised"
    assert all(s.end_time is not None for s in spans())
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]


class Posting(MemoryStore):
    """A store that sends a non-durable swap unanswered (it lands here, unanswered)."""

    def post_compare_and_swap(self, key: str, expected_revision: int, record: Any) -> None:
        self.compare_and_swap(key, expected_revision, record, durable=False)


class AsyncPosting:
    """Posting's asyncio twin (a sync store's thread bridge does not post)."""

    def __init__(self) -> None:
        self.inner = Posting()

    async def create_if_absent(self, key: str, record: Any) -> bool:
        return self.inner.create_if_absent(key, record)

    async def get(self, key: str) -> Any:
        return self.inner.get(key)

    async def compare_and_swap(
        self, key: str, expected: int, record: Any, *, durable: bool = True
    ) -> bool:
        return self.inner.compare_and_swap(key, expected, record, durable=durable)

    async def post_compare_and_swap(self, key: str, expected: int, record: Any) -> None:
        self.inner.post_compare_and_swap(key, expected, record)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_write_sent_unanswered_is_a_posted_operation(asynchronous: bool) -> None:
    store: Any = AsyncPosting() if asynchronous else Posting()
    inbox = Inbox()
    run(store, binding(), inbox, asynchronous=asynchronous)
    assert inbox.received
    posted = spans("tool_checkpoint.store.post")
    assert posted, [s.name for s in spans()]
    attributes = dict(posted[0].attributes or {})
    assert attributes["tool_checkpoint.outcome"] == "posted"
    assert attributes["tool_checkpoint.durable"] is False
    assert attributes["tool_checkpoint.store"] == type(store).__name__
    durations = points(READER.get_metrics_data(), "tool_checkpoint.store.duration")
    assert ("post", "posted") in {
        (a["tool_checkpoint.operation"], a["tool_checkpoint.outcome"]) for a, _ in durations
    }
