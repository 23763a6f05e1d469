"""The fault suite: real servers on loopback, taken away at each write of a call.

The tool itself (or ``deliver``) takes the store away, so the outage starts exactly after
the write before it landed and hits the next one; it ends by itself about a second later
(tests/faults.py): Redis stopped and restarted on its port with its append-only file,
PostgreSQL stopped and restarted (``pg_ctl``), or its writes killed
(``pg_terminate_backend``) while a table lock holds them, SQLite's write lock held by a
second connection past the store's ``busy_timeout``. Sync (``run_once``) and async
(``run_once_async``), and through ``checkpointed`` for the result write:

- the result write and the delivered mark outlive the outage at the default write budget:
  the tool ran once, the record ends delivered with the exact payload;
- a write budget shorter than the outage: needs-execution-reconciliation, the result in
  ``outcome.unstored``, one ERROR line naming the store key (never the call id or the
  payload), the record left executing, and a later call never reruns the tool; the guard
  hands the framework the live result;
- an async call cancelled while it waits out the outage stores the result once the store
  is back, then the cancellation propagates (nothing is sent after it);
- the create-claim: the tool never runs while the store is away, and runs once after;
- Redis back without its data: the tool never runs twice; the record is restored, claimed
  by the same attempt, with the result stored over it.

Each server is this module's own (restarting it would disturb the session's).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from faults import (
    AsyncSpyStore,
    Outage,
    PostgresKill,
    PostgresRestart,
    RedisRestart,
    SpyStore,
    SQLiteLock,
)
from postgres_server import PostgresServer, start_or_fail
from redis_server import RedisServer, RedisServerError, start_redis_server, stop_redis_server
from tool_execution_checkpoint import (
    AsyncSQLiteStore,
    Binding,
    CallNotAnswered,
    SQLiteStore,
    checkpoint_key,
    checkpointed,
    run_once,
    run_once_async,
    tool_call,
)
from tool_execution_checkpoint.runner import RunOutcome, RunStatus
from tool_execution_checkpoint.stores.postgres import AsyncPostgresStore, PostgresStore
from tool_execution_checkpoint.stores.redis import AsyncRedisStore, RedisStore

SECRET = "SECRET-fault-7d1e"
PAYLOAD: dict[str, Any] = {
    "charge": "ch_1",
    "amount": 4200,
    "note": SECRET,
    "lines": [1, 2.5, None, True, "é", {"sku": "a"}],
}
TABLE = "tec_faults"
LOGGER = "tool_execution_checkpoint"
SHORT_BUDGET = 0.2
"""A write budget that a call spends well within an outage of :data:`LONG` seconds."""
LONG = 1.0
"""The length of an outage that outlasts :data:`SHORT_BUDGET` (the call ends within 0.4 s)."""

MODES = ["sync", "async"]


# --- the servers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fault_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of this module's own (appendonly, fsync always), restarted by tests."""
    try:
        server = start_redis_server(tmp_path_factory.mktemp("fault-redis"))
    except RedisServerError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield server
    finally:
        stop_redis_server(server)


@pytest.fixture(scope="module")
def fault_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this module's own, restarted and fenced by tests."""
    server = start_or_fail()
    try:
        yield server
    finally:
        server.stop()


# --- one store under one kind of outage ----------------------------------------------------


@dataclass
class Backend:
    """How to open a store and take it away.

    Attributes:
        name: The test id.
        open_store: ``open_store(mode)``: a new sync or async store.
        outage: ``outage(seconds)``: an outage of about that long.
        short: The length of an outage the default budget outlives (seconds).
    """

    name: str
    open_store: Callable[[str], Any]
    outage: Callable[[float], Outage]
    short: float


def _redis(server: RedisServer) -> Backend:
    def open_store(mode: str) -> Any:
        prefix = f"faults-{uuid.uuid4().hex}:"
        kind = RedisStore if mode == "sync" else AsyncRedisStore
        return kind.from_url(server.url(), prefix=prefix)

    return Backend("redis-restart", open_store, lambda s: RedisRestart(server, s), 0.6)


def _postgres_kill(server: PostgresServer) -> Backend:
    def open_store(mode: str) -> Any:
        kind = PostgresStore if mode == "sync" else AsyncPostgresStore
        return kind(server.url, table=TABLE)

    return Backend("postgres-kill", open_store, lambda s: PostgresKill(server, TABLE, s), 0.6)


def _postgres_restart(server: PostgresServer) -> Backend:
    # A pool that waits 0.05 s for a connection: its own wait does not cover the outage,
    # so the runner's read-backs must. (psycopg_pool tries to reconnect at once, then after
    # about 1 s, 3 s, 7 s: the server is back before the second try.)
    def open_store(mode: str) -> Any:
        kind = PostgresStore if mode == "sync" else AsyncPostgresStore
        return kind(server.url, table=TABLE, connect_timeout=0.05)

    return Backend("postgres-restart", open_store, lambda s: PostgresRestart(server, s), 0.5)


def _sqlite(directory: Path) -> Backend:
    path = directory / "faults.sqlite3"

    def open_store(mode: str) -> Any:
        kind = SQLiteStore if mode == "sync" else AsyncSQLiteStore
        return kind(path, busy_timeout=0.1)

    return Backend("sqlite-lock", open_store, lambda s: SQLiteLock(path, s), 0.8)


BACKENDS = ["redis-restart", "postgres-kill", "sqlite-lock"]
"""The outages every scenario runs under (a PostgreSQL restart is slower: the result write
alone runs under it)."""


def _backend(request: pytest.FixtureRequest, directory: Path) -> Backend:
    name: str = request.param
    if name == "redis-restart":
        return _redis(request.getfixturevalue("fault_redis"))
    if name == "redis-amnesia":
        server = request.getfixturevalue("fault_redis")
        plain = _redis(server)
        return Backend(
            name,
            plain.open_store,
            lambda s: RedisRestart(server, s, keep_data=False),
            plain.short,
        )
    if name == "postgres-kill":
        return _postgres_kill(request.getfixturevalue("fault_postgres"))
    if name == "postgres-restart":
        return _postgres_restart(request.getfixturevalue("fault_postgres"))
    assert name == "sqlite-lock"
    return _sqlite(directory)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The store of the test's parameter; every outage it began is over at the end, even
    when the test failed before it waited (the next test gets its server back)."""
    chosen = _backend(request, tmp_path)
    begun: list[Outage] = []

    def outage(seconds: float) -> Outage:
        begun.append(chosen.outage(seconds))
        return begun[-1]

    yield Backend(chosen.name, chosen.open_store, outage, chosen.short)
    for each in begun:
        each.wait_over()


# --- one call, sync or async ---------------------------------------------------------------


class Tool:
    """A tool whose runs are counted; its first run takes the store away as it returns."""

    def __init__(self, outage: Outage | None = None) -> None:
        self.runs = 0
        self.outage = outage

    def sync(self) -> dict[str, Any]:
        self.runs += 1
        if self.outage is not None and self.runs == 1:
            self.outage.begin()
        return PAYLOAD

    async def async_(self) -> dict[str, Any]:
        return self.sync()


class Inbox:
    """Where deliveries go; the first one can take the store away before it returns."""

    def __init__(self, outage: Outage | None = None) -> None:
        self.received: list[Any] = []
        self.outage = outage

    def sync(self, payload: Any) -> None:
        self.received.append(payload)
        if self.outage is not None and len(self.received) == 1:
            self.outage.begin()

    async def async_(self, payload: Any) -> None:
        self.sync(payload)


@dataclass
class Host:
    """One store, wrapped to count its failures, driven sync or async."""

    mode: str
    inner: Any
    store: SpyStore | AsyncSpyStore

    async def run(self, binding: Binding, tool: Tool, inbox: Inbox, **options: Any) -> RunOutcome:
        if self.mode == "sync":
            assert isinstance(self.store, SpyStore)
            return run_once(self.store, binding, tool.sync, inbox.sync, **options)
        return await run_once_async(self.store, binding, tool.async_, inbox.async_, **options)

    async def stored(self, key: str) -> Mapping[str, Any]:
        found = self.inner.get(key)
        if self.mode == "async":
            found = await found
        assert found is not None, "no record is stored"
        return dict(found)


@asynccontextmanager
async def hosted(backend: Backend, mode: str) -> AsyncIterator[Host]:
    """A store of ``backend``, ready (set up, connected), closed at the end."""
    inner = backend.open_store(mode)
    spy: SpyStore | AsyncSpyStore = SpyStore(inner) if mode == "sync" else AsyncSpyStore(inner)
    host = Host(mode, inner, spy)
    probe = inner.get(checkpoint_key(new_binding()))  # connects, creates the table
    if mode == "async":
        await probe
    try:
        yield host
    finally:
        closing = inner.close() if mode == "sync" else inner.aclose()
        if isinstance(closing, Awaitable):
            await closing


def new_binding() -> Binding:
    return Binding("faults", f"call-{uuid.uuid4().hex}", "charge", "1", "sha256:00")


def error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == LOGGER and record.levelno >= logging.ERROR
    ]


def delivered_with_payload(record: Mapping[str, Any]) -> None:
    assert record["status"] == "delivered"
    assert record["result"]["payload"] == PAYLOAD


# --- the result write ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", [*BACKENDS, "postgres-restart"], indirect=True)
def test_the_result_write_outlives_an_outage_right_after_the_tool_ran(
    backend: Backend, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The store goes away as the tool returns, for about a second: the result is resent
    until it lands, delivered once, and stored exactly; nothing is logged at ERROR."""

    async def scenario() -> None:
        async with hosted(backend, mode) as host:
            binding, outage = new_binding(), backend.outage(backend.short)
            tool, inbox = Tool(outage), Inbox()
            outcome = await host.run(binding, tool, inbox)
            outage.wait_over()
            assert host.store.failed["swap:delivering"] >= 1, "the outage missed the result"
            assert host.store.failed["create"] == 0
            assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED, outcome.reason
            assert tool.runs == 1
            assert inbox.received == [PAYLOAD]
            assert outcome.payload == PAYLOAD
            delivered_with_payload(await host.stored(checkpoint_key(binding)))

    asyncio.run(scenario())
    assert error_lines(caplog) == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_spent_write_budget_keeps_the_result_and_leaves_the_call_to_reconcile(
    backend: Backend, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An outage longer than the write budget: the call answers needs-execution-
    reconciliation with the tool's result in ``unstored``, logs one ERROR line naming the
    key (not the call id, not the payload), leaves the record executing; once the store is
    back, a later call answers the same and never reruns the tool."""

    async def scenario() -> None:
        async with hosted(backend, mode) as host:
            binding, outage = new_binding(), backend.outage(LONG)
            key = checkpoint_key(binding)
            tool, inbox = Tool(outage), Inbox()
            outcome = await host.run(binding, tool, inbox, write_budget=SHORT_BUDGET)
            gave_up_within = outage.ended_at == 0.0  # the store was still away
            outage.wait_over()
            assert gave_up_within, "the call outlasted the outage: the budget was not kept"
            assert host.store.failed["swap:delivering"] >= 1
            assert outcome.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
            assert outcome.reason == "the tool ran but its result could not be stored"
            assert outcome.ran_tool
            assert outcome.unstored is not None
            assert outcome.unstored.payload == PAYLOAD
            assert inbox.received == []
            lines = error_lines(caplog)
            assert len(lines) == 1, lines
            assert key in lines[0]
            assert binding.call_id not in lines[0]
            assert SECRET not in lines[0]
            record = await host.stored(key)
            assert record["status"] == "executing"
            assert record["result"] is None

            later = await host.run(binding, Tool(), Inbox())
            assert later.status is RunStatus.NEEDS_EXECUTION_RECONCILIATION
            assert not later.ran_tool
            assert tool.runs == 1
            assert (await host.stored(key))["status"] == "executing"

    asyncio.run(scenario())


@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_a_call_cancelled_while_it_waits_out_an_outage_still_stores_the_result(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """``run_once_async`` resending the result through an outage is cancelled: it goes on
    resending within the write budget, stores the result once the store is back, and then
    the cancellation propagates; nothing is sent after it, nothing is logged at ERROR, and a
    later call delivers the stored result without running the tool again."""

    async def scenario() -> None:
        async with hosted(backend, "async") as host:
            binding, outage = new_binding(), backend.outage(LONG)
            key, tool, inbox = checkpoint_key(binding), Tool(outage), Inbox()
            call = asyncio.create_task(host.run(binding, tool, inbox))
            give_up = time.monotonic() + 5.0
            while not host.store.failed["swap:delivering"] and not call.done():
                assert time.monotonic() < give_up, "the result write never failed"
                await asyncio.sleep(0.005)  # polls the spy's count
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert outage.ended_at != 0.0, "the cancellation did not wait for the store"
            outage.wait_over()
            assert inbox.received == []
            stored = await host.stored(key)
            assert stored["status"] == "completed"  # its delivery released: never sent
            assert stored["result"]["payload"] == PAYLOAD
            later = await host.run(binding, Tool(), inbox)
            assert later.status is RunStatus.DELIVERED_STORED_RESULT
            assert inbox.received == [PAYLOAD]
            assert tool.runs == 1

    asyncio.run(scenario())
    assert error_lines(caplog) == []


class CountingTool(Tool):
    """A tool whose every run returns a payload of its own (which run it was)."""

    def sync(self) -> dict[str, Any]:
        return {**super().sync(), "run": self.runs}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ["redis-amnesia"], indirect=True)
def test_a_store_back_without_the_claim_never_gets_the_tool_run_again(
    backend: Backend, mode: str
) -> None:
    """Redis comes back empty after the tool ran (as after a failover to a replica that
    never got the claim): the call must not run the tool a second time, and the one result
    it has is the one kept (stored, or handed back in ``outcome.unstored``)."""

    async def scenario() -> None:
        async with hosted(backend, mode) as host:
            binding, outage = new_binding(), backend.outage(backend.short)
            tool, inbox = CountingTool(outage), Inbox()
            outcome = await host.run(binding, tool, inbox)
            outage.wait_over()
            assert tool.runs == 1, f"the tool ran {tool.runs} times in one call"
            first = {**PAYLOAD, "run": 1}
            # restored: created again under the same attempt, the result stored over it
            assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED, outcome.reason
            assert outcome.unstored is None
            assert inbox.received == [first]
            assert outcome.payload == first

    asyncio.run(scenario())


# --- the delivered mark --------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_the_delivered_mark_outlives_an_outage_right_after_the_send(
    backend: Backend, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The store goes away as ``deliver`` returns: the delivered mark is resent until it
    lands; the payload was sent once and the record ends delivered."""

    async def scenario() -> None:
        async with hosted(backend, mode) as host:
            binding, outage = new_binding(), backend.outage(backend.short)
            tool, inbox = Tool(), Inbox(outage)
            outcome = await host.run(binding, tool, inbox)
            outage.wait_over()
            assert host.store.failed["swap:delivered"] >= 1, "the outage missed the mark"
            assert host.store.failed["swap:delivering"] == 0
            assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED, outcome.reason
            assert tool.runs == 1
            assert inbox.received == [PAYLOAD]
            delivered_with_payload(await host.stored(checkpoint_key(binding)))

    asyncio.run(scenario())
    assert error_lines(caplog) == []


# --- the create-claim ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_the_tool_never_runs_while_its_claim_cannot_be_made(backend: Backend, mode: str) -> None:
    """The store is away before the call: the claim is refused, the tool does not run and
    the call answers store-unavailable; called again once the store is back, the tool runs
    once and its result is delivered."""

    async def scenario() -> None:
        async with hosted(backend, mode) as host:
            binding, outage = new_binding(), backend.outage(backend.short)
            tool, inbox = Tool(), Inbox()
            outage.begin()
            first = await host.run(binding, tool, inbox)
            away = outage.ended_at == 0.0
            outage.wait_over()
            assert host.store.failed["create"] >= 1, "the outage missed the claim"
            if first.status is RunStatus.STORE_UNAVAILABLE:
                assert away, "the call gave up only after the store was back"
                assert tool.runs == 0
                assert not first.ran_tool
                again = await host.run(binding, tool, inbox)
            else:  # the runner waited the outage out: the tool ran after it
                again = first
            assert again.status is RunStatus.EXECUTED_AND_DELIVERED, again.reason
            assert tool.runs == 1
            assert inbox.received == [PAYLOAD]
            delivered_with_payload(await host.stored(checkpoint_key(binding)))

    asyncio.run(scenario())


# --- through the guard ---------------------------------------------------------------------


async def _guarded_call(mode: str, guarded: Callable[..., Any], call_id: str) -> Any:
    with tool_call(call_id):
        answer = guarded("4242")
        return await answer if mode == "async" else answer


def _guard_of(
    host: Host, tool: Tool, **options: Any
) -> tuple[Callable[..., Any], Callable[[str], str]]:
    """The guarded tool on the host's store, and the store key of a call id."""
    if host.mode == "sync":

        def charge(card: str) -> dict[str, Any]:
            del card
            return tool.sync()

        guarded: Callable[..., Any] = checkpointed(host.store, namespace="faults", **options)(
            charge
        )
    else:

        async def charge_async(card: str) -> dict[str, Any]:
            del card
            return await tool.async_()

        guarded = checkpointed(host.store, namespace="faults", name="charge", **options)(
            charge_async
        )
    guard = guarded.__checkpoint_guard__  # type: ignore[attr-defined]

    def key_of(call_id: str) -> str:
        return checkpoint_key(guard.binding(call_id, {"card": "4242"}))

    return guarded, key_of


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_the_guard_hands_back_a_result_whose_write_outlived_an_outage(
    backend: Backend, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``checkpointed``: the store goes away as the tool returns; the result write is
    resent until it lands, the framework gets the live result, the record is delivered
    with it, and a replay hands the stored result back without running the tool."""

    async def scenario() -> None:
        async with hosted(backend, mode) as host:
            outage = backend.outage(backend.short)
            tool = Tool(outage)
            guarded, key_of = _guard_of(host, tool)
            call_id = f"toolu_{uuid.uuid4().hex}"
            answer = await _guarded_call(mode, guarded, call_id)
            outage.wait_over()
            # the guard's result write is the hand-back step: it lands in delivered
            assert host.store.failed["swap:delivered"] >= 1, "the outage missed the result"
            assert host.store.failed["swap:delivering"] == 0
            assert answer is PAYLOAD
            record = await host.stored(key_of(call_id))
            assert record["status"] == "delivered"
            assert record["result"]["payload"] == {"returned": PAYLOAD}
            assert await _guarded_call(mode, guarded, call_id) == PAYLOAD
            assert tool.runs == 1

    asyncio.run(scenario())
    assert error_lines(caplog) == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS, indirect=True)
def test_the_guard_hands_back_the_live_result_when_the_budget_is_spent(
    backend: Backend, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``checkpointed(store, write_budget=...)`` shorter than the outage: the framework
    gets the live result (the effect happened), one ERROR line names the key, the record
    is left executing, and a replay once the store is back is refused
    (CallNotAnswered) without running the tool."""

    async def scenario() -> None:
        async with hosted(backend, mode) as host:
            outage = backend.outage(LONG)
            tool = Tool(outage)
            guarded, key_of = _guard_of(host, tool, write_budget=SHORT_BUDGET)
            call_id = f"toolu_{uuid.uuid4().hex}"
            key = key_of(call_id)
            answer = await _guarded_call(mode, guarded, call_id)
            gave_up_within = outage.ended_at == 0.0
            outage.wait_over()
            assert gave_up_within, "the call outlasted the outage: the budget was not kept"
            assert answer is PAYLOAD
            lines = error_lines(caplog)
            assert len(lines) == 1, lines
            assert key in lines[0]
            assert call_id not in lines[0]
            assert SECRET not in lines[0]
            assert (await host.stored(key))["status"] == "executing"
            with pytest.raises(CallNotAnswered):
                await _guarded_call(mode, guarded, call_id)
            assert tool.runs == 1

    asyncio.run(scenario())
