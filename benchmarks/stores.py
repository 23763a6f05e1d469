"""The runner's whole lifecycle per call on each store, against the raw statements.

The subject is one ``run_once(store, binding, tool, deliver)`` on a key of its own: create
the record already claimed (``create_claimed``), run the tool (a 1 KiB result), store the
result together with its delivery claim (``complete_and_claim_delivery``), deliver,
record the delivery: three writes and no read (a call reads only after a write it did
not land). Each is its own durable commit on a durable store, except the last one, the
delivered mark, by default: PostgresStore commits it with ``synchronous_commit`` off and
RedisStore does not append it to the AOF.

The baseline (``_raw.raw_lifecycle``) sends the same three writes (the claimed record,
the result with its delivery claim, the delivered mark) through the same driver with none
of the library: plain dict records encoded with ``json.dumps``, the store's own
statements sent raw (taken from the store: its SQL or its Lua scripts, the relaxed
delivered mark on PostgreSQL and Redis included, on a connection or pool of the same
size and the same durability). So the two sides differ by the library's work alone.

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

With 1 worker a third side, **the store's writes alone**, sends through a store of its
own the very writes ``run_once`` made for a call (recorded by running ``run_once`` on a
store that keeps them, before the rounds: the records are made before timing), the tool
and the delivery called as on the other sides: the store's own cost over the same raw
statements (its argument checks, encoding the record, its driver code and error
mapping), without the runner and the core. Its raw side still builds and encodes its
dict records each call.

Workloads: 1 worker (the figure is microseconds per call), 8 worker threads on distinct
keys and 8 threads on one hot key per call (calls per second; on a hot key all 8 start
the same call at once, one runs the tool, and a "call" is one key served; a loser on
either side reads the record after the write it lost, as the runner does). Each round
runs a batch on each side, in an order that rotates each round; the figures are medians
over the rounds, the ratio is the median per-round ratio, and each side's client CPU per
call (this process's, all threads) is recorded beside it. Target for run_once: 1.15x.

    python benchmarks/stores.py [--quick] [--stores memory,sqlite,postgres,redis] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

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
from _raw import Raw, RawMemory, RawPostgres, RawRedis, RawSQLite, raw_binding, raw_lifecycle
from psycopg_pool import ConnectionPool

from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    CheckpointStore,
    MemoryStore,
    RunStatus,
    SQLiteStore,
    run_once,
)
from tool_execution_checkpoint.stores.postgres import PostgresStore
from tool_execution_checkpoint.stores.redis import RedisStore
from tool_execution_checkpoint.transitions import CONTRACTS_ENABLED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

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


def binding_of(call_id: str) -> Binding:
    """The library side's binding of ``call_id`` (the raw side writes ``raw_binding``)."""
    return Binding("bench", call_id, "tool", "1", "sha256:0")


# --- one call's writes, as run_once makes them ------------------------------------------

Write = tuple[int | None, Checkpoint]
"""One write of a call: the expected revision (None: a create) and the record."""


class Recorder:
    """A store on which every write lands and that keeps them: run on it, ``run_once``
    makes the writes of a call whose writes all land, and reads nothing."""

    def __init__(self) -> None:
        self.key = ""
        self.writes: list[Write] = []

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        self.key = key
        self.writes.append((None, record))
        return True

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        del durable  # every write is kept the same way
        del key
        self.writes.append((expected_revision, record))
        return True

    def get(self, key: str) -> Mapping[str, Any] | None:
        del key
        raise AssertionError("a call whose writes all land reads nothing")


def recorded_call(call_id: str) -> tuple[str, list[Write]]:
    """The key and the writes of ``run_once`` for ``call_id``, made on a :class:`Recorder`."""
    recorder = Recorder()
    delivered: list[object] = []
    run_once(recorder, binding_of(call_id), lambda: PAYLOAD, delivered.append)
    if delivered != [PAYLOAD] or len(recorder.writes) != 3:
        raise AssertionError("run_once did not make one call's three writes")
    return recorder.key, recorder.writes


def replay(store: CheckpointStore, key: str, writes: Sequence[Write]) -> None:
    """Send ``writes`` through ``store`` under ``key``; each must land."""
    for expected, record in writes:
        if expected is None:
            landed = store.create_if_absent(key, record)
        else:
            landed = store.compare_and_swap(key, expected, record)
        if not landed:
            raise AssertionError("a replayed write did not land")


# --- the sides and their batches -------------------------------------------------------


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
        tool, deliver = tally.tool(call_id), tally.deliver(call_id)
        outcome = run_once(store, binding_of(call_id), tool, deliver)
        if outcome.status is RunStatus.STORE_UNAVAILABLE:
            raise AssertionError("the store failed during the benchmark")

    return call


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


def writes_side(store: CheckpointStore, recorded: Iterator[tuple[str, list[Write]]]) -> Side:
    """The store's writes alone: each call replays the next recorded call's writes."""

    def call(call_id: str, me: str, tally: Tally) -> None:
        del me
        key, writes = next(recorded)
        payload = tally.tool(call_id)()
        replay(store, key, writes)
        tally.deliver(call_id)(payload)

    return call


_batches = itertools.count()


def batch(side: Side, workers: int, hot: bool, calls: int, cpu: list[float]) -> float:
    """Run ``calls`` calls (keys) with ``workers`` threads; return seconds per call and
    append this process's CPU seconds per call to ``cpu``."""
    run = f"{uuid.uuid4().hex[:8]}-{next(_batches)}"
    tally = Tally()
    processor = time.process_time()
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
    cpu.append((time.process_time() - processor) / calls)
    tally.check(calls)
    return elapsed / calls


# --- the stores ------------------------------------------------------------------------


class Trio(NamedTuple):
    """A store for run_once, a store of the same kind for the writes alone, the raw side."""

    runner: CheckpointStore
    writes: CheckpointStore
    raw: Raw


@contextlib.contextmanager
def memory_trio(directory: Path) -> Iterator[Trio]:
    del directory
    yield Trio(MemoryStore(), MemoryStore(), RawMemory())


@contextlib.contextmanager
def sqlite_trio(directory: Path) -> Iterator[Trio]:
    with (
        SQLiteStore(directory / "runner.db") as runner,
        SQLiteStore(directory / "writes.db") as writes,
        contextlib.closing(RawSQLite(directory / "raw.db")) as raw,
    ):
        yield Trio(runner, writes, raw)


@contextlib.contextmanager
def postgres_trio(directory: Path) -> Iterator[Trio]:
    del directory
    with (
        PostgresServer() as server,
        PostgresStore(server.url, table="runner_store", min_size=8, max_size=8) as runner,
        PostgresStore(server.url, table="writes_store", min_size=8, max_size=8) as writes,
        ConnectionPool(
            server.url, min_size=8, max_size=8, kwargs={"autocommit": True}, open=True
        ) as pool,
    ):
        raw = RawPostgres(pool, server.url, "runner_raw")
        pool.wait()
        yield Trio(runner, writes, raw)


@contextlib.contextmanager
def redis_trio(directory: Path) -> Iterator[Trio]:
    server = start_redis_server(directory / "redis")
    try:
        with (
            redis.Redis.from_url(server.url()) as store_client,
            redis.Redis.from_url(server.url()) as raw_client,
        ):
            yield Trio(
                RedisStore(store_client, prefix="runner-store:"),
                RedisStore(store_client, prefix="writes-store:"),
                RawRedis(raw_client, "runner-raw:"),
            )
    finally:
        stop_redis_server(server)


TRIOS: dict[str, Callable[[Path], contextlib.AbstractContextManager[Trio]]] = {
    "memory": memory_trio,
    "sqlite": sqlite_trio,
    "postgres": postgres_trio,
    "redis": redis_trio,
}


def calls_per_batch(store: str, quick: bool) -> int:
    full = {"memory": 400, "sqlite": 64, "postgres": 48, "redis": 48}[store]
    return max(8, full // 4) if quick else full


def measure_workload(trio: Trio, workload: Workload, calls: int, rounds: int) -> dict[str, Any]:
    """Paired rounds of the runner and the raw side (and with 1 worker, the store's
    writes alone) on one workload."""
    _, workers, hot = workload
    warm = max(workers, calls // 8)
    sides = {"raw": raw_side(trio.raw), "runner": library_side(trio.runner)}
    if workers == 1:
        recorded = [recorded_call(f"writes-{n}") for n in range(warm + calls * rounds)]
        sides["writes"] = writes_side(trio.writes, iter(recorded))
    for call in sides.values():  # warm up: connections, caches, scripts
        batch(call, workers, hot, warm, [])
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    samples = paired_rounds(
        {
            side: functools.partial(batch, call, workers, hot, calls, cpu[side])
            for side, call in sides.items()
        },
        rounds,
    )
    paired = compare(samples, "raw")
    result: dict[str, Any] = {
        "workers": workers,
        "hot_key": hot,
        "calls_per_batch": calls,
        "rounds": rounds,
        "contracts_enabled": CONTRACTS_ENABLED,
        "added_us_per_call": round(paired.us("runner") - paired.us("raw"), 1),
    }
    for side in sides:
        result[f"{side}_us_per_call"] = round(paired.us(side), 1)
        result[f"{side}_calls_per_second"] = round(paired.per_second(side), 1)
        result[f"{side}_cpu_us_per_call"] = round(statistics.median(cpu[side]) * 1e6, 1)
    result["ratio"] = round(paired.ratios["runner"], 3)
    if "writes" in sides:
        result["writes_ratio"] = round(paired.ratios["writes"], 3)
    return result


def measure_store(
    store: str, quick: bool, rounds: int, workloads: Sequence[Workload] = WORKLOADS
) -> dict[str, Any]:
    """Every workload on one store, paired rounds of its sides."""
    calls = calls_per_batch(store, quick)
    with (
        tempfile.TemporaryDirectory(prefix="tec-bench-stores-") as name,
        TRIOS[store](Path(name)) as trio,
    ):
        return {
            workload[0]: measure_workload(trio, workload, calls, rounds) for workload in workloads
        }


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


ROWS = (
    ("runner", "", "run_once", "ratio", TARGET, "3 writes per call on each side, 1 KiB result"),
    (
        "writes",
        "store_writes.",
        "the store's writes alone",
        "writes_ratio",
        None,
        "run_once's 3 writes of a call, its records made before timing",
    ),
)
"""The rows of a workload: (side, key prefix, label, ratio field, target, note); a
workload without the ratio field (the writes alone at 8 workers) has no such row."""


def figures_for(store: str, results: dict[str, Any], suffix: str = "") -> list[Figure]:
    """The run_once row of each workload, and the store's writes alone with 1 worker."""
    figures = []
    tail = suffix.replace(" ", "_").replace(",", "")
    for workload, result in results.items():
        single = result["workers"] == 1
        slug = workload.replace(", ", "_").replace(" ", "_")
        measured = "us_per_call" if single else "calls_per_second"
        for side, prefix, label, ratio, target, note in ROWS:
            if ratio not in result:
                continue
            figures.append(
                Figure(
                    key=f"stores.{store}.{prefix}{slug}{tail}",
                    label=f"{label}, {LABELS[store]}, {workload}{suffix}",
                    value=result[f"{side}_{measured}"],
                    unit="µs/call" if single else "calls/s",
                    baseline=result[f"raw_{measured}"],
                    baseline_label="raw statements",
                    ratio=result[ratio],
                    target=target,
                    note=note,
                    details=result,
                )
            )
    return figures


def run(quick: bool = False, stores: Sequence[str] = STORES) -> tuple[list[Figure], dict[str, Any]]:
    """Every workload with the contracts on (the default), then the 1-worker workload
    with them off, in a subprocess: each store's rows, then its contracts-off rows."""
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
