"""The runner's whole lifecycle per call on each store, against the raw statements.

The subject is one ``run_once(store, binding, tool, deliver)`` on a key of its own: create
the record already claimed (``create_claimed``), run the tool (a 1 KiB result), store the
result together with its delivery claim (``complete_and_claim_delivery``), deliver,
record the delivery: three writes and no read (a call reads only after a write it did
not land). Each is its own durable commit on a durable store, except the last one, the
delivered mark, by default: PostgresStore commits it with ``synchronous_commit`` off and
RedisStore does not append it to the AOF.

The baseline (``raw_lifecycle``) sends the same three writes (the claimed record, the
result with its delivery claim, the delivered mark) through the same driver with none of
the library: plain dict records encoded with ``json.dumps``, the store's statements sent
raw (the very SQL or Lua scripts the store sends, the relaxed delivered mark on
PostgreSQL and Redis included, on a connection or pool of the same size and the same durability).
So the two sides differ by the library's work alone.

- MemoryStore: a dict of JSON texts under one lock (what MemoryStore keeps);
- SQLiteStore: sqlite3 on a file with the store's schema and pragmas (WAL,
  synchronous=FULL), BEGIN IMMEDIATE / one INSERT or UPDATE / COMMIT, one connection
  under a lock as the store has;
- PostgresStore: psycopg through a psycopg_pool pool of 8, autocommit, the store's
  INSERT ... ON CONFLICT DO NOTHING, SELECT and UPDATE ... WHERE key AND revision, on a
  throwaway durable server (fsync and synchronous_commit on);
- RedisStore: redis-py sending the store's own Lua scripts (EVALSHA) and HGET, on a
  throwaway server with appendonly yes and appendfsync always.

So the ratio is everything the library adds on top of the storage work (the core's
records and checks, the store's argument checks and error mapping, and the runner).

Workloads: 1 worker (the figure is microseconds per call), 8 worker threads on distinct
keys and 8 threads on one hot key per call (calls per second; on a hot key all 8 start
the same call at once, one runs the tool, and a "call" is one key served; a loser on
either side reads the record after the write it lost, as the runner does). Each round
runs a batch on each side, in alternating order; the figures are medians over the
rounds and the ratio is the median per-round ratio. Target: 1.15x.

    python benchmarks/stores.py [--quick] [--stores memory,sqlite,postgres,redis] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, cast

import redis
from _measure import (
    Figure,
    compare,
    paired_rounds,
    print_table,
    run_with_contracts,
    threaded,
    write_json,
)
from psycopg_pool import ConnectionPool

from tool_execution_checkpoint import (
    Binding,
    CheckpointStore,
    MemoryStore,
    RunStatus,
    SQLiteStore,
    run_once,
)
from tool_execution_checkpoint.stores.postgres import _RELAX, PostgresStore
from tool_execution_checkpoint.stores.redis import RedisStore
from tool_execution_checkpoint.table import Status
from tool_execution_checkpoint.transitions import CONTRACTS_ENABLED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from store_postgres import RawSql
from store_redis import RawRedis

from postgres_server import PostgresServer
from redis_server import start_redis_server, stop_redis_server

PAYLOAD = {"data": "x" * (1024 - len('{"data":""}'))}  # 1,024 bytes of compact JSON
TARGET = 1.15
Workload = tuple[str, int, bool]
"""(name, worker threads, whether they share one hot key)."""
SINGLE: Workload = ("1 worker", 1, False)
WORKLOADS: tuple[Workload, ...] = (SINGLE, ("8 workers", 8, False), ("8 workers, hot key", 8, True))
STORES = ("memory", "sqlite", "postgres", "redis")
LABELS = {
    "memory": "MemoryStore",
    "sqlite": "SQLiteStore",
    "postgres": "PostgresStore",
    "redis": "RedisStore",
}


def _now() -> tuple[str, int]:
    """The time as stored text and as microseconds since the epoch."""
    moment = datetime.now(UTC)
    return moment.isoformat(), int(moment.timestamp() * 1_000_000)


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


# --- the raw side ---------------------------------------------------------------------


class Raw(Protocol):
    """The storage statements, taking plain dict records and their JSON text."""

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool: ...

    def select(self, key: str) -> dict[str, Any] | None: ...

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool: ...


class RawMemory:
    """What MemoryStore keeps: JSON texts and revisions in dicts, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.texts: dict[str, str] = {}
        self.revisions: dict[str, int] = {}

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool:
        del updated_us
        with self.lock:
            if key in self.texts:
                return False
            self.texts[key] = text
            self.revisions[key] = record["revision"]
            return True

    def select(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            text = self.texts.get(key)
        return None if text is None else cast(dict[str, Any], json.loads(text))

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool:
        del updated_us
        with self.lock:
            if self.revisions.get(key) != expected:
                return False
            self.texts[key] = text
            self.revisions[key] = record["revision"]
            return True


class RawSQLite:
    """The store's statements through sqlite3, one connection under a lock (as the
    store has), with the store's schema and pragmas."""

    INSERT = (
        "INSERT INTO tec_checkpoint"
        " (key, revision, status, namespace, call_id, updated_at, updated_us, record)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING"
    )
    UPDATE = (
        "UPDATE tec_checkpoint SET revision = ?, status = ?, namespace = ?, call_id = ?,"
        " updated_at = ?, updated_us = ?, record = ? WHERE key = ? AND revision = ?"
    )
    SELECT = "SELECT record FROM tec_checkpoint WHERE key = ?"

    def __init__(self, path: Path) -> None:
        SQLiteStore(path).close()  # the same schema
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")

    def _write(self, statement: str, parameters: tuple[object, ...]) -> bool:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            if self.db.execute(statement, parameters).rowcount != 1:
                self.db.execute("ROLLBACK")
                return False
            self.db.execute("COMMIT")
            return True

    @staticmethod
    def _columns(record: dict[str, Any], text: str, updated_us: int) -> tuple[object, ...]:
        binding = record["binding"]
        return (
            record["revision"],
            record["status"],
            binding["namespace"],
            binding["callId"],
            record["updatedAt"],
            updated_us,
            text,
        )

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool:
        return self._write(self.INSERT, (key, *self._columns(record, text, updated_us)))

    def select(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            row = self.db.execute(self.SELECT, (key,)).fetchone()
        return None if row is None else cast(dict[str, Any], json.loads(row[0]))

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool:
        columns = self._columns(record, text, updated_us)
        return self._write(self.UPDATE, (*columns, key, expected))

    def close(self) -> None:
        self.db.close()


def _record(binding: dict[str, str], at: str) -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "revision": 1,
        "status": "ready",
        "binding": binding,
        "createdAt": at,
        "updatedAt": at,
        "execution": None,
        "result": None,
        "delivery": None,
    }


def raw_lifecycle(
    raw: Raw,
    key: str,
    *,
    binding: dict[str, str],
    me: str,
    tool: Callable[[], Any],
    deliver: Callable[[Any], None],
    mark: bool = True,
) -> bool:
    """The baseline: one call's writes as the runner makes them, with dict records and
    none of the library: create the record already claimed, run the tool, store the
    result with its delivery claim, deliver, mark it delivered (unless not ``mark``: the
    lower bound of a call that does not wait for its delivered mark, which peers.py
    times). False when another worker created the record first; like the runner, a
    landed write needs no read, and a lost one reads what the winner left (here: to check
    it and stop)."""
    at, us = _now()
    execution = {"attemptId": me, "claimedAt": at, "uncertain": None}
    claim = {**_record(binding, at), "status": "executing", "execution": execution}
    if not raw.insert(key, claim, _dumps(claim), us):
        return _lost(raw, key, binding)
    payload = tool()
    at, us = _now()
    result = {"payload": payload, "completedAt": at, "prunedAt": None}
    delivery = {"deliveryId": me, "claimedAt": at, "deliveredAt": None}
    delivering = {**claim, "revision": 2, "status": "delivering", "updatedAt": at}
    delivering |= {"result": result, "delivery": delivery}
    if not raw.update(key, 1, delivering, _dumps(delivering), us):
        raise AssertionError("the owner lost its completion")
    deliver(payload)
    if not mark:
        return True
    at, us = _now()
    delivered = {**delivering, "revision": 3, "status": "delivered", "updatedAt": at}
    delivered["delivery"] = {**delivery, "deliveredAt": at}
    if not raw.update(key, 2, delivered, _dumps(delivered), us):
        raise AssertionError("the owner lost its delivery")
    return True


def _lost(raw: Raw, key: str, binding: dict[str, str]) -> bool:
    """After a lost write: read what the winner stored, as the runner does, and stop."""
    stored = raw.select(key)
    if stored is None or stored["binding"] != binding:
        raise AssertionError("the record is not there")
    return False


# --- the measured batches ----------------------------------------------------------------


class Tally:
    """Counts, per call id, how often the tool ran and the result was delivered."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ran: Counter[str] = Counter()
        self.delivered: Counter[str] = Counter()

    def tool(self, call_id: str) -> Callable[[], Any]:
        def run() -> Any:
            with self.lock:
                self.ran[call_id] += 1
            return PAYLOAD

        return run

    def deliver(self, call_id: str) -> Callable[[Any], None]:
        def send(payload: Any) -> None:
            del payload
            with self.lock:
                self.delivered[call_id] += 1

        return send

    def check(self, calls: int) -> None:
        if len(self.ran) != calls or set(self.ran.values()) != {1}:
            raise AssertionError(f"expected each of {calls} tools to run once: {self.ran}")
        if len(self.delivered) != calls or set(self.delivered.values()) != {1}:
            raise AssertionError(f"expected each of {calls} results delivered once")


Side = Callable[[str, str, Tally], None]
"""One worker's share of one call: (call id, worker name, tally)."""


def library_side(store: CheckpointStore) -> Side:
    def call(call_id: str, me: str, tally: Tally) -> None:
        del me
        binding = Binding("bench", call_id, "tool", "1", "sha256:0")
        outcome = run_once(store, binding, tally.tool(call_id), tally.deliver(call_id))
        if outcome.status is RunStatus.STORE_UNAVAILABLE:
            raise AssertionError("the store failed during the benchmark")

    return call


def raw_binding(call_id: str) -> dict[str, str]:
    """The persisted binding of the library side's ``Binding("bench", call_id, "tool",
    "1", "sha256:0")``, as the raw side writes it."""
    return {
        "namespace": "bench",
        "callId": call_id,
        "toolName": "tool",
        "toolRevision": "1",
        "inputFingerprint": "sha256:0",
    }


def raw_side(raw: Raw) -> Side:
    def call(call_id: str, me: str, tally: Tally) -> None:
        raw_lifecycle(
            raw,
            f"bench/{call_id}",
            binding=raw_binding(call_id),
            me=me,
            tool=tally.tool(call_id),
            deliver=tally.deliver(call_id),
        )

    return call


_batches = itertools.count()


def batch(side: Side, workers: int, hot: bool, calls: int) -> float:
    """Run ``calls`` calls (keys) with ``workers`` threads; return seconds per call."""
    run = f"{uuid.uuid4().hex[:8]}-{next(_batches)}"
    tally = Tally()
    if workers == 1:
        started = time.perf_counter()
        for number in range(calls):
            side(f"{run}-{number}", "w0", tally)
        elapsed = time.perf_counter() - started
    elif hot:
        barrier = threading.Barrier(workers)

        def contend(worker: int) -> None:
            for number in range(calls):
                barrier.wait()  # all workers start this call together
                side(f"{run}-{number}", f"w{worker}-{number}", tally)

        elapsed = threaded([functools.partial(contend, worker) for worker in range(workers)])
    else:
        share = max(1, calls // workers)
        calls = share * workers

        def own(worker: int) -> None:
            for number in range(share):
                side(f"{run}-{worker}-{number}", f"w{worker}", tally)

        elapsed = threaded([functools.partial(own, worker) for worker in range(workers)])
    tally.check(calls)
    return elapsed / calls


# --- the stores ------------------------------------------------------------------------


class RawPostgres(RawSql):
    """PostgresStore's statements through a psycopg pool, taking dict records; the
    delivered mark commits with synchronous_commit off, as the store's default does."""

    def __init__(self, pool: ConnectionPool[Any], table: str) -> None:
        super().__init__(pool, table)
        self.relaxed_sql = self.update_sql + _RELAX.encode()

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool:
        params = (key, record["revision"], record["status"], updated_us, text)
        with self.pool.connection() as connection:
            return bool(connection.execute(self.insert_sql, params).rowcount == 1)

    def select(self, key: str) -> dict[str, Any] | None:
        with self.pool.connection() as connection:
            row = connection.execute(self.select_sql, (key,)).fetchone()
        return None if row is None else cast(dict[str, Any], json.loads(row[0]))

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool:
        params = (record["revision"], record["status"], updated_us, text, key, expected)
        # The store's default: the delivered mark commits with synchronous_commit off.
        query = self.relaxed_sql if record["status"] == "delivered" else self.update_sql
        with self.pool.connection() as connection:
            return bool(connection.execute(query, params).rowcount == 1)


class RawRedisRecords(RawRedis):
    """RedisStore's scripts and HGET through plain redis-py, taking dict records; the
    delivered mark is the relaxed swap, as the store's default is."""

    def insert(self, key: str, record: dict[str, Any], text: str, updated_us: int) -> bool:
        args = [record["revision"], record["status"], updated_us, text, key]
        keys = [self.prefix + "rec:" + key, self.indexes[Status(record["status"])]]
        return bool(self.create(keys=keys, args=args))

    def select(self, key: str) -> dict[str, Any] | None:
        text = cast(bytes | None, self.client.hget(self.prefix + "rec:" + key, "record"))
        return None if text is None else cast(dict[str, Any], json.loads(text))

    def update(
        self, key: str, expected: int, record: dict[str, Any], text: str, updated_us: int
    ) -> bool:
        args: list[str | int] = [
            expected,
            record["revision"],
            record["status"],
            updated_us,
            text,
            key,
        ]
        keys = [self.prefix + "rec:" + key, *self.indexes.values()]
        swap = self.swap_relaxed if record["status"] == "delivered" else self.swap
        return bool(swap(keys=keys, args=args))


Pair = tuple[CheckpointStore, Raw]


@contextlib.contextmanager
def memory_pair(directory: Path) -> Iterator[Pair]:
    del directory
    yield MemoryStore(), RawMemory()


@contextlib.contextmanager
def sqlite_pair(directory: Path) -> Iterator[Pair]:
    store, raw = SQLiteStore(directory / "store.db"), RawSQLite(directory / "raw.db")
    try:
        yield store, raw
    finally:
        store.close()
        raw.close()


@contextlib.contextmanager
def postgres_pair(directory: Path) -> Iterator[Pair]:
    del directory
    with (
        PostgresServer() as server,
        PostgresStore(server.url, table="runner_store", min_size=8, max_size=8) as store,
        ConnectionPool(
            server.url, min_size=8, max_size=8, kwargs={"autocommit": True}, open=True
        ) as pool,
    ):
        with PostgresStore(server.url, table="runner_raw") as setup:
            setup.get("set-up")  # the same table, made by the store's DDL
        pool.wait()
        raw = RawPostgres(pool, "runner_raw")
        yield store, raw


@contextlib.contextmanager
def redis_pair(directory: Path) -> Iterator[Pair]:
    server = start_redis_server(directory / "redis")
    store_client = redis.Redis.from_url(server.url())
    raw_client = redis.Redis.from_url(server.url())
    try:
        yield (
            RedisStore(store_client, prefix="runner-store:"),
            RawRedisRecords(raw_client, "runner-raw:"),
        )
    finally:
        store_client.close()
        raw_client.close()
        stop_redis_server(server)


PAIRS: dict[str, Callable[[Path], contextlib.AbstractContextManager[Pair]]] = {
    "memory": memory_pair,
    "sqlite": sqlite_pair,
    "postgres": postgres_pair,
    "redis": redis_pair,
}


def calls_per_batch(store: str, quick: bool) -> int:
    full = {"memory": 400, "sqlite": 64, "postgres": 48, "redis": 48}[store]
    return max(8, full // 4) if quick else full


def measure_store(
    store: str, quick: bool, rounds: int, workloads: Sequence[Workload] = WORKLOADS
) -> dict[str, Any]:
    """Every workload on one store, paired rounds of runner and raw batches."""
    results: dict[str, Any] = {}
    calls = calls_per_batch(store, quick)
    with (
        tempfile.TemporaryDirectory(prefix="tec-bench-stores-") as name,
        PAIRS[store](Path(name)) as (checkpoints, raw),
    ):
        sides = {"raw": raw_side(raw), "runner": library_side(checkpoints)}
        for workload, workers, hot in workloads:
            for side in sides.values():  # warm up: connections, caches, scripts
                batch(side, workers, hot, max(workers, calls // 8))
            samples = paired_rounds(
                {
                    name: functools.partial(batch, side, workers, hot, calls)
                    for name, side in sides.items()
                },
                rounds,
            )
            paired = compare(samples, "raw")
            results[workload] = {
                "workers": workers,
                "hot_key": hot,
                "calls_per_batch": calls,
                "rounds": rounds,
                "runner_us_per_call": round(paired.us("runner"), 1),
                "raw_us_per_call": round(paired.us("raw"), 1),
                "runner_calls_per_second": round(paired.per_second("runner"), 1),
                "raw_calls_per_second": round(paired.per_second("raw"), 1),
                "ratio": round(paired.ratios["runner"], 3),
                "added_us_per_call": round(paired.us("runner") - paired.us("raw"), 1),
                "contracts_enabled": CONTRACTS_ENABLED,
            }
    return results


def single_worker_without_contracts(quick: bool, store: str, rounds: int) -> dict[str, Any]:
    """The 1-worker workload on ``store`` in a fresh interpreter with the core's contracts
    off (``TOOL_CHECKPOINT_CONTRACTS=0``; they are read at import)."""
    with tempfile.TemporaryDirectory(prefix="tec-bench-unchecked-") as name:
        output = Path(name) / "results.json"
        command = [str(Path(__file__).resolve()), "--stores", store]
        command += ["--single-worker", "--rounds", str(rounds), "--json", str(output)]
        command += ["--quick"] if quick else []
        run_with_contracts(False, command, timeout=1200)
        details: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))["stores"][store]
    if details[SINGLE[0]]["contracts_enabled"] is not False:
        raise RuntimeError("the contracts were on in the contracts-off run")
    return details


def figures_for(store: str, results: dict[str, Any], suffix: str = "") -> list[Figure]:
    figures = []
    for workload, result in results.items():
        single = result["workers"] == 1
        slug = workload.replace(", ", "_").replace(" ", "_")
        figures.append(
            Figure(
                key=f"stores.{store}.{slug}{suffix.replace(' ', '_').replace(',', '')}",
                label=f"run_once, {LABELS[store]}, {workload}{suffix}",
                value=result["runner_us_per_call"] if single else result["runner_calls_per_second"],
                unit="µs/call" if single else "calls/s",
                baseline=result["raw_us_per_call"] if single else result["raw_calls_per_second"],
                baseline_label="raw statements",
                ratio=result["ratio"],
                target=TARGET,
                note="3 writes per call on each side, 1 KiB result",
                details=result,
            )
        )
    return figures


def run(quick: bool = False, stores: Sequence[str] = STORES) -> tuple[list[Figure], dict[str, Any]]:
    """Every workload with the contracts on (the default), then the 1-worker workload
    with them off, in a subprocess: each store's rows, then its contracts-off row."""
    if not CONTRACTS_ENABLED:
        raise RuntimeError(
            "the contracts-on rows need the contracts on (no -O, no TOOL_CHECKPOINT_CONTRACTS=0)"
        )
    rounds = 3 if quick else 9
    details: dict[str, Any] = {}
    unchecked: dict[str, Any] = {}
    figures = []
    for store in stores:  # the contracts-off run right after its store's, to drift less
        details[store] = measure_store(store, quick, rounds)
        unchecked[store] = single_worker_without_contracts(quick, store, rounds)
        figures += figures_for(store, details[store])
        figures += figures_for(store, unchecked[store], ", contracts off")
    return figures, {"contracts_on": details, "contracts_off": unchecked}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small batches, 3 rounds")
    parser.add_argument("--stores", default=",".join(STORES), help="comma-separated subset")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--single-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=9, help=argparse.SUPPRESS)
    args = parser.parse_args()
    stores = [name for name in args.stores.split(",") if name]
    if args.single_worker:  # the contracts-off run of single_worker_without_contracts
        details = {
            store: measure_store(store, args.quick, args.rounds, [SINGLE]) for store in stores
        }
        figures = [figure for store in stores for figure in figures_for(store, details[store])]
    else:
        figures, details = run(args.quick, stores)
    print_table(figures)
    if args.json:
        write_json(args.json, figures, {"stores": details})


if __name__ == "__main__":
    main()
