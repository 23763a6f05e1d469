"""Guarded calls per second through PostgresStore, against the same SQL run raw through
psycopg on the same server in the same run.

One guarded call is the host protocol's full lifecycle on its own key: create if absent,
get and decide, CAS the execution claim, CAS the completion with a 1 KiB payload, CAS the
delivery claim, CAS the delivery. The baseline runs the same transitions and the same
SQL statements (one INSERT ... ON CONFLICT DO NOTHING, one SELECT, four UPDATE ... WHERE
key AND revision) through a psycopg_pool pool of the same size, with the same
durability (the server's synchronous_commit=on, fsync=on), so the ratio is what the store
layer costs: argument checks, the liveness check and error mapping (``--no-fsync`` shows
it without disk latency, on a server that is not durable). Round trips per call
are counted from libpq's protocol trace. Workloads: 1 and 8 threads on distinct keys,
and 8 threads racing on one hot key per call (one wins the claim, the rest lose it).

The benchmark starts its own PostgreSQL server on loopback (tests/postgres_server.py)::

    python benchmarks/store_postgres.py [--calls N] [--repeats N] [--json PATH]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from _measure import paired_rounds
from psycopg import Connection, pq
from psycopg_pool import ConnectionPool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from postgres_server import PostgresServer
from tool_execution_checkpoint import (
    Action,
    Binding,
    Checkpoint,
    CheckpointStore,
    Status,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
)
from tool_execution_checkpoint.stores.postgres import PostgresStore
from tool_execution_checkpoint.validation import timestamp_microseconds

NOW = "2026-01-01T00:00:00Z"
PAYLOAD = {"data": "x" * 1013}  # 1,024 bytes of compact JSON
assert len(json.dumps(PAYLOAD, separators=(",", ":"))) == 1024


class RawSql:
    """The baseline: the store's statements, hand-written, straight through psycopg."""

    def __init__(self, pool: ConnectionPool[Any], table: str) -> None:
        self.pool = pool
        self.insert_sql = (
            f"INSERT INTO public.{table} (key, revision, status, updated_us, record) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING"
        ).encode()
        self.update_sql = (
            f"UPDATE public.{table} SET revision = %s, status = %s, updated_us = %s, "
            "record = %s WHERE key = %s AND revision = %s"
        ).encode()
        self.select_sql = f"SELECT record FROM public.{table} WHERE key = %s".encode()

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        params = (
            key,
            record.revision,
            record.status.value,
            timestamp_microseconds(record.updated_at),
            record.to_json(),
        )
        connection: Connection[Any] = self.pool.getconn()
        try:
            return connection.execute(self.insert_sql, params).rowcount == 1
        finally:
            self.pool.putconn(connection)

    def get(self, key: str) -> Mapping[str, Any] | None:
        connection: Connection[Any] = self.pool.getconn()
        try:
            row = connection.execute(self.select_sql, (key,)).fetchone()
        finally:
            self.pool.putconn(connection)
        if row is None:
            return None
        loaded: dict[str, Any] = json.loads(row[0])
        return loaded

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        params = (
            record.revision,
            record.status.value,
            timestamp_microseconds(record.updated_at),
            record.to_json(),
            key,
            expected_revision,
        )
        connection: Connection[Any] = self.pool.getconn()
        try:
            return connection.execute(self.update_sql, params).rowcount == 1
        finally:
            self.pool.putconn(connection)


def guarded_call(store: CheckpointStore, binding: Binding, me: str) -> None:
    """One pass of the host protocol for ``binding``, as in the README."""
    key = checkpoint_key(binding)
    store.create_if_absent(key, create_checkpoint(binding, created_at=NOW))
    raw = store.get(key)
    assert raw is not None
    decision = decide_checkpoint(raw, binding)
    record = decision.checkpoint
    if decision.action is Action.EXECUTE:
        claim = claim_execution(record, attempt_id=me, at=NOW)
        if not store.compare_and_swap(key, claim.expected_revision, claim.next):
            return
        done = complete_execution(claim.next, attempt_id=me, at=NOW, result=PAYLOAD)
        if not store.compare_and_swap(key, done.expected_revision, done.next):
            raise AssertionError("the owning attempt lost its completion")
        record = done.next
    if record.status is Status.COMPLETED:
        delivery = claim_delivery(record, delivery_id=me, at=NOW)
        if not store.compare_and_swap(key, delivery.expected_revision, delivery.next):
            return
        finish = complete_delivery(delivery.next, delivery_id=me, at=NOW)
        if not store.compare_and_swap(key, finish.expected_revision, finish.next):
            raise AssertionError("the owning delivery lost its completion")


def calls_per_second(
    store: CheckpointStore, label: str, *, threads: int, calls: int, hot: bool
) -> tuple[float, float]:
    """Run ``calls`` guarded calls per thread; return guarded calls per second (for a
    hot key, passes of the protocol: all threads race on each call's key) and this
    process's CPU microseconds per call (the client's share, less sensitive than wall
    time to other load on the machine)."""
    start = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def work(number: int) -> None:
        start.wait()
        try:
            for index in range(calls):
                call_id = f"{label}-{index}" if hot else f"{label}-{number}-{index}"
                guarded_call(store, Binding("bench", call_id, "tool", "1", "f"), f"t{number}")
        except BaseException as error:
            errors.append(error)

    pool = [threading.Thread(target=work, args=(number,)) for number in range(threads)]
    for thread in pool:
        thread.start()
    start.wait()
    began, cpu = time.perf_counter(), time.process_time()
    for thread in pool:
        thread.join()
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    if errors:
        raise errors[0]
    return threads * calls / elapsed, cpu * 1e6 / (threads * calls)


def round_trips_per_call(make: Callable[[ConnectionPool[Any]], CheckpointStore], url: str) -> int:
    """Round trips of one guarded call, counted from libpq's trace on a one-connection
    pool: every Sync (extended protocol) or Query (simple protocol) waits for a reply."""
    with (
        ConnectionPool(url, min_size=1, max_size=1, kwargs={"autocommit": True}, open=True) as pool,
        tempfile.TemporaryFile() as trace,
    ):
        store = make(pool)
        guarded_call(store, Binding("bench", "warm-up", "tool", "1", "f"), "w")
        connection = pool.getconn()
        pool.putconn(connection)
        connection.pgconn.trace(trace.fileno())
        connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        guarded_call(store, Binding("bench", "traced", "tool", "1", "f"), "w")
        connection.pgconn.untrace()
        trace.seek(0)
        lines = trace.read().decode("utf-8", "replace").splitlines()
    fields = [line.split("\t") for line in lines]
    return sum(1 for f in fields if len(f) > 2 and f[0] == "F" and f[2] in ("Sync", "Query"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=300, help="guarded calls per thread")
    parser.add_argument("--repeats", type=int, default=5, help="paired rounds; medians")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--no-fsync",
        action="store_true",
        help="run the server with fsync and synchronous_commit off (both sides alike): the "
        "store layer's cost without disk latency; not a durable configuration",
    )
    args = parser.parse_args()
    durable = not args.no_fsync

    with PostgresServer(durable=durable) as server:
        url = server.url
        results: dict[str, Any] = {
            "calls_per_thread": args.calls,
            "repeats": args.repeats,
            "durable": durable,
        }
        with (
            PostgresStore(
                url, table="bench_store", min_size=8, max_size=8, durable=durable
            ) as store,
            ConnectionPool(
                url, min_size=8, max_size=8, kwargs={"autocommit": True}, open=True
            ) as raw_pool,
        ):
            # Set both tables up with the store's DDL; fill the raw pool.
            with PostgresStore(url, table="bench_raw", durable=durable) as setup:
                setup.get("warm-up")
            raw_pool.wait()
            raw = RawSql(raw_pool, "bench_raw")
            results["round_trips_per_call_store"] = round_trips_per_call(
                lambda pool: PostgresStore(pool, table="bench_store", durable=durable), url
            )
            results["round_trips_per_call_raw"] = round_trips_per_call(
                lambda pool: RawSql(pool, "bench_raw"), url
            )
            workloads = [
                ("1 thread", 1, False),
                ("8 threads", 8, False),
                ("8 threads, hot key", 8, True),
            ]
            print(
                f"{'workload':<20}{'store calls/s':>14}{'raw calls/s':>12}{'store cost':>11}"
                f"{'store CPU us':>13}{'raw CPU us':>11}"
            )
            for name, threads, hot in workloads:
                calls = args.calls if threads == 1 else max(1, args.calls // 2)
                # Warm both up (pool connections, caches), then alternate the measured runs.
                for target, tag in ((store, "s"), (raw, "r")):
                    calls_per_second(
                        target, f"{name}-warm-{tag}", threads=threads, calls=20, hot=hot
                    )
                repeats = itertools.count()

                def measured(
                    target: CheckpointStore,
                    tag: str,
                    *,
                    name: str = name,
                    threads: int = threads,
                    calls: int = calls,
                    hot: bool = hot,
                    repeats: Iterator[int] = repeats,
                ) -> tuple[float, float]:
                    return calls_per_second(
                        target,
                        f"{name}-{tag}{next(repeats)}",
                        threads=threads,
                        calls=calls,
                        hot=hot,
                    )

                runs = paired_rounds(
                    {
                        "store": functools.partial(measured, store, "store"),
                        "raw": functools.partial(measured, raw, "raw"),
                    },
                    args.repeats,
                )
                store_rate = statistics.median(rate for rate, _ in runs["store"])
                raw_rate = statistics.median(rate for rate, _ in runs["raw"])
                store_cpu = statistics.median(cpu for _, cpu in runs["store"])
                raw_cpu = statistics.median(cpu for _, cpu in runs["raw"])
                ratio = raw_rate / store_rate
                key = name.replace(", ", "_").replace(" ", "_")
                results[key] = {
                    "threads": threads,
                    "hot_key": hot,
                    "store_calls_per_second": round(store_rate, 1),
                    "raw_calls_per_second": round(raw_rate, 1),
                    "store_cost_vs_raw": round(ratio, 3),
                    "store_client_cpu_us_per_call": round(store_cpu, 1),
                    "raw_client_cpu_us_per_call": round(raw_cpu, 1),
                }
                print(
                    f"{name:<20}{store_rate:>14.1f}{raw_rate:>12.1f}{ratio:>10.3f}x"
                    f"{store_cpu:>13.0f}{raw_cpu:>11.0f}"
                )
        print(
            f"round trips per guarded call: store {results['round_trips_per_call_store']}, "
            f"raw {results['round_trips_per_call_raw']}"
        )
        if args.json:
            with open(args.json, "w", encoding="utf-8") as out:
                json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
