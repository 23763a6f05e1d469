"""Relaxed writes on Redis, proven with the server's own append-only file.

A compare-and-swap the host calls non-durable (``durable=False``, as the table declares a
delivery's completion and a payload's pruning) runs its script after
``redis.set_repl(redis.REPL_REPLICA)``, unless the store was made with
``synchronous_delivered=True``: its effects reach memory and replicas but not the AOF, so
Redis answers it without an fsync. Every other write is appended (and, with appendfsync
always, fsynced before the reply).

The measure is ``aof_current_size`` from INFO persistence, on a server of this module
alone (nothing else writes to it). Then what the store's docstring says of a lost mark is
shown on real restarts: a crash and a clean shutdown both read the record back as the one
before, delivering, whole (hash and index entries alike); BGREWRITEAOF before the restart
keeps it; a replica receives it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from redis_server import (  # noqa: F401
    RedisServer,
    redis_url,
    start_redis_server,
    stop_redis_server,
)
from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    CheckpointError,
    ErrorCode,
    Listing,
    Status,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    open_store,
    prune_result,
)
from tool_execution_checkpoint.stores import RecordSummary
from tool_execution_checkpoint.stores.redis import AsyncRedisStore, RedisStore
from tool_execution_checkpoint.table import TABLE
from tool_execution_checkpoint.transitions import Transition

N = 20
"""Swaps per measurement."""
NOW = "2026-01-01T00:00:00Z"

Swap = tuple[str, Transition]


@pytest.fixture(scope="module")
def quiet_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A durable server for this module alone: only these tests grow its AOF."""
    server = start_redis_server(tmp_path_factory.mktemp("redis-relaxed"))
    try:
        yield server
    finally:
        stop_redis_server(server)


def _aof_size(server: RedisServer) -> int:
    client = server.client()
    try:
        return int(client.info("persistence")["aof_current_size"])
    finally:
        client.close()


def _delivering(call_id: str) -> tuple[str, Checkpoint, list[Transition]]:
    """A key, its new record and the durable swaps that take that record to delivering."""
    chosen = Binding("redis-relaxed", call_id, "tool", "1", "sha256:0")
    created = create_checkpoint(chosen, created_at=NOW)
    claim = claim_execution(created, attempt_id="a", at=NOW)
    done = complete_execution(claim.next, attempt_id="a", at=NOW, result={"n": call_id})
    delivery = claim_delivery(done.next, delivery_id="d", at=NOW)
    return checkpoint_key(chosen), created, [claim, done, delivery]


def _set_up(store: RedisStore, call_id: str) -> tuple[str, Checkpoint]:
    key, created, steps = _delivering(call_id)
    assert store.create_if_absent(key, created)
    for step in steps:
        assert store.compare_and_swap(key, step.expected_revision, step.next)
    return key, steps[-1].next


def _completions(records: list[tuple[str, Checkpoint]]) -> list[Swap]:
    return [(key, complete_delivery(record, delivery_id="d", at=NOW)) for key, record in records]


def _prunes(completions: list[Swap]) -> list[Swap]:
    return [(key, prune_result(t.next, at=NOW)) for key, t in completions]


DURABLE = ("create", "claim", "result", "delivery claim")
"""The writes that take a call to delivering, each of which must be appended."""
MARK_DURABLE = TABLE.transitions["complete_delivery"].durable
PRUNE_DURABLE = TABLE.transitions["prune_result"].durable
"""The durability a host passes with a delivered mark and a pruning: the table's."""


async def _settled(value: Any) -> Any:
    """``value``, awaited when a store method of the asyncio store returned a coroutine."""
    return await value if inspect.isawaitable(value) else value


def _measure(
    server: RedisServer, kind: str, *, synchronous_delivered: bool, relax_all: bool = False
) -> dict[str, int]:
    """The fewest AOF bytes any one of N calls' durable writes added, by write (each
    measured alone and made when it is awaited), then the AOF bytes that N completions
    and then N prunes added; each swap read back exactly, and sent as durable as the
    table declares it (every swap non-durable with ``relax_all``: a host that gets it
    wrong). ``kind`` picks the store: the sync one or the asyncio one, driven by the same
    steps."""
    opener = RedisStore if kind == "sync" else AsyncRedisStore

    async def scenario() -> dict[str, int]:
        store = opener.from_url(
            server.url(),
            prefix=f"{kind}-{time.monotonic_ns()}:",
            synchronous_delivered=synchronous_delivered,
        )
        try:
            measured: dict[str, int] = {}
            records = []
            for index in range(N):
                key, created, steps = _delivering(f"call-{synchronous_delivered}-{index}")
                writes: list[Callable[[], object]] = [
                    functools.partial(store.create_if_absent, key, created)
                ]
                writes += [
                    functools.partial(
                        store.compare_and_swap,
                        key,
                        step.expected_revision,
                        step.next,
                        durable=not relax_all,
                    )
                    for step in steps
                ]
                for name, write in zip(DURABLE, writes, strict=True):
                    before = _aof_size(server)
                    assert await _settled(write())
                    grown = _aof_size(server) - before
                    measured[name] = min(measured.get(name, grown), grown)
                records.append((key, steps[-1].next))
            completions = _completions(records)
            prunes = _prunes(completions)
            for name, swaps, durable in (
                ("complete", completions, MARK_DURABLE),
                ("prune", prunes, PRUNE_DURABLE),
            ):
                before = _aof_size(server)
                for key, transition in swaps:
                    swap = store.compare_and_swap(
                        key, transition.expected_revision, transition.next, durable=durable
                    )
                    assert await _settled(swap)
                measured[name] = _aof_size(server) - before
            for key, transition in prunes:
                assert await _settled(store.get(key)) == transition.next.to_dict()
            return measured
        finally:
            if isinstance(store, RedisStore):
                store.close()
            else:
                await store.aclose()

    return asyncio.run(scenario())


def _check_appended(measured: dict[str, int]) -> None:
    """Every durable write was appended, each alone."""
    for name in DURABLE:
        assert measured[name] >= 200, measured  # at least its record's JSON


def _check_relaxed(measured: dict[str, int]) -> None:
    """Every durable write was appended, each alone; no delivered mark was."""
    _check_appended(measured)
    assert measured["complete"] == 0, measured
    assert measured["prune"] == 0, measured


def test_the_delivered_mark_and_the_pruning_are_the_only_non_durable_writes() -> None:
    """What a host tells the store to relax is the table's: the delivered mark and the
    pruning, today; every composed step (the hand-back step, which lands in delivered,
    too) is durable."""
    relaxed = {name for name, rule in TABLE.transitions.items() if not rule.durable}
    assert relaxed == {"complete_delivery", "prune_result"}
    assert (MARK_DURABLE, PRUNE_DURABLE) == (False, False)
    assert all(step.durable for step in TABLE.composed.values())


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_delivered_mark_is_not_appended_and_every_other_write_is(
    quiet_server: RedisServer, kind: str
) -> None:
    measured = _measure(quiet_server, kind, synchronous_delivered=False)
    print(f"{kind}, {N} calls, synchronous_delivered=False, AOF bytes: {measured}")
    _check_relaxed(measured)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_check_catches_a_claim_sent_non_durable(quiet_server: RedisServer, kind: str) -> None:
    """The store relaxes by the write's durability, not by its status: a host that sent
    its claim (which guards against a rerun) non-durable is caught, the claim adding
    nothing to the AOF."""
    measured = _measure(quiet_server, kind, synchronous_delivered=False, relax_all=True)
    assert measured["claim"] == 0, measured
    with pytest.raises(AssertionError):
        _check_relaxed(measured)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_synchronous_delivered_appends_every_write(quiet_server: RedisServer, kind: str) -> None:
    measured = _measure(quiet_server, kind, synchronous_delivered=True)
    print(f"{kind}, {N} calls, synchronous_delivered=True, AOF bytes: {measured}")
    _check_appended(measured)
    for name in ("complete", "prune"):
        assert measured[name] >= N * 200, measured


def _listed(store: RedisStore) -> list[tuple[str, Status]]:
    """Every record's key and status, listed one status at a time, so that a record
    listed under two statuses would show twice."""
    found = []
    for status in Status:
        listed = store.list_records(Listing([status]))
        assert all(isinstance(item, RecordSummary) for item in listed), listed
        found += [(item.key, item.status) for item in listed if isinstance(item, RecordSummary)]
    return found


def _restarted(server: RedisServer, how: str) -> RedisServer:
    """The server stopped (``kill``: SIGKILL, a crash; ``terminate``: a clean shutdown)
    and started again on its own directory, so it loads its AOF."""
    if how == "kill":
        server.process.kill()
        server.process.wait()
    stop_redis_server(server)
    return start_redis_server(server.directory, password=server.password)


@pytest.mark.parametrize("how", ["kill", "terminate"])
def test_a_restart_reads_a_lost_mark_back_as_delivering_whole(tmp_path: Path, how: str) -> None:
    server = start_redis_server(tmp_path / "redis")
    try:
        with RedisStore.from_url(server.url()) as store:
            key, delivering = _set_up(store, "lost")
            mark = complete_delivery(delivering, delivery_id="d", at=NOW)
            assert store.compare_and_swap(
                key, mark.expected_revision, mark.next, durable=MARK_DURABLE
            )
            assert store.get(key) == mark.next.to_dict()
        server = _restarted(server, how)
        with RedisStore.from_url(server.url()) as store:
            assert store.get(key) == delivering.to_dict()  # the record before, exactly
            assert _listed(store) == [(key, Status.DELIVERING)]
            # The protocol goes on from there: the mark is made again, at the old revision.
            assert store.compare_and_swap(
                key, mark.expected_revision, mark.next, durable=MARK_DURABLE
            )
    finally:
        stop_redis_server(server)


@pytest.mark.parametrize("keep", ["synchronous_delivered", "bgrewriteaof"])
def test_a_mark_survives_a_crash_when_appended_or_rewritten(tmp_path: Path, keep: str) -> None:
    server = start_redis_server(tmp_path / "redis")
    try:
        relaxed = keep != "synchronous_delivered"
        with RedisStore.from_url(server.url(), synchronous_delivered=not relaxed) as store:
            key, delivering = _set_up(store, "kept")
            mark = complete_delivery(delivering, delivery_id="d", at=NOW)
            assert store.compare_and_swap(
                key, mark.expected_revision, mark.next, durable=MARK_DURABLE
            )
        if keep == "bgrewriteaof":
            _rewrite(server)
        server = _restarted(server, "kill")
        with RedisStore.from_url(server.url()) as store:
            assert store.get(key) == mark.next.to_dict()
            assert _listed(store) == [(key, Status.DELIVERED)]
    finally:
        stop_redis_server(server)


def _rewrite(server: RedisServer) -> None:
    client = server.client()
    try:
        client.bgrewriteaof()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            info = client.info("persistence")
            busy = info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]
            if not busy and info["aof_last_bgrewrite_status"] == "ok":
                return
            time.sleep(0.05)
        pytest.fail("BGREWRITEAOF did not finish in 10 s")
    finally:
        client.close()


def test_a_replica_receives_the_mark(tmp_path: Path) -> None:
    """REPL_REPLICA, not REPL_NONE: a replica, which a failover may promote, holds the
    mark and the record's index entries as the primary does."""
    primary = start_redis_server(tmp_path / "primary")
    follow = ("--replicaof", primary.host, str(primary.port), "--masterauth", primary.password)
    replica = start_redis_server(
        tmp_path / "replica", password=primary.password, extra_arguments=follow
    )
    reader = replica.client()
    try:
        _await_link(reader)  # linked first: the mark must come by the stream, not a sync
        with RedisStore.from_url(primary.url()) as store:
            key, delivering = _set_up(store, "replicated")
            mark = complete_delivery(delivering, delivery_id="d", at=NOW)
            assert store.compare_and_swap(
                key, mark.expected_revision, mark.next, durable=MARK_DURABLE
            )
            with primary.client() as client:
                assert client.execute_command("WAIT", 1, 10_000) == 1
        with RedisStore(reader) as seen:
            assert seen.get(key) == mark.next.to_dict()
            assert _listed(seen) == [(key, Status.DELIVERED)]
    finally:
        reader.close()
        stop_redis_server(replica)
        stop_redis_server(primary)


def _await_link(client: redis.Redis) -> None:
    deadline = time.monotonic() + 10
    while client.info("replication").get("master_link_status") != "up":
        if time.monotonic() > deadline:
            pytest.fail("the replica did not link to its primary in 10 s")
        time.sleep(0.05)


def test_the_option_must_be_a_bool_and_reaches_the_store(redis_url: str) -> None:  # noqa: F811
    for bad in ("false", 0, None):
        with pytest.raises(CheckpointError) as refused:
            RedisStore.from_url(redis_url, synchronous_delivered=bad)  # type: ignore[arg-type]
        assert refused.value.code is ErrorCode.INVALID_ARGUMENT
        assert refused.value.field == "synchronous_delivered"
    for waits in (False, True):
        with open_store(redis_url, synchronous_delivered=waits) as store:
            assert isinstance(store, RedisStore)
            assert store._layout.relax is not waits
