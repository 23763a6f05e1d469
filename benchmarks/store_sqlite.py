"""Guarded calls per second through SQLiteStore, against the same SQL run raw in the same run.

One guarded call is the whole host protocol on a key of its own: create the record, get
it and decide, CAS the execution claim, CAS the completion with a 1 KiB payload, CAS the
delivery claim, CAS the delivery: one read and five durable commits. The baseline runs
the very statements the store runs (BEGIN IMMEDIATE, one INSERT or UPDATE, COMMIT; one
SELECT) through plain sqlite3 on a file with the same schema and pragmas (WAL,
synchronous=FULL, fullfsync; nothing contends, so no busy wait happens on either side),
encoding the same records and deciding on what it read. The records are computed before
timing on both sides: the pure core is the same for both and is not what is measured.
Raw and store calls alternate, one each in turn, so that both see the same disk. The
target is judged on the median time per call: fsync latency on a shared disk has a heavy
tail that lands on either side at random, and moves the mean (total time, shown too) by
several percent from run to run. The CPU time per call, which leaves out waiting for
fsync, is shown as well. Then the store alone with 1 and 8
threads on distinct keys, and 8 threads on one hot key, where all 8 claim at revision 1
and 7 lose the CAS.

    python benchmarks/store_sqlite.py [--calls N] [--json PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _measure import paired_rounds

from tool_execution_checkpoint import (
    Action,
    Binding,
    Checkpoint,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
)
from tool_execution_checkpoint.sqlite import SQLiteStore
from tool_execution_checkpoint.validation import timestamp_microseconds

NOW = "2026-01-01T00:00:00Z"
PAYLOAD = {"text": "x" * 1_012}  # 1,024 bytes of compact JSON
TARGET_RATIO = 1.15

Call = tuple[Binding, str, list[Checkpoint]]


def prepare(prefix: str, count: int) -> list[Call]:
    """Each call's binding, key, and the five records it writes, in order."""
    calls = []
    for number in range(count):
        binding = Binding("bench", f"{prefix}-{number}", "tool", "1", "sha256:0")
        created = create_checkpoint(binding, created_at=NOW)
        claim = claim_execution(created, attempt_id="attempt", at=NOW).next
        done = complete_execution(claim, attempt_id="attempt", at=NOW, result=PAYLOAD).next
        delivery = claim_delivery(done, delivery_id="delivery", at=NOW).next
        delivered = complete_delivery(delivery, delivery_id="delivery", at=NOW).next
        calls.append(
            (binding, checkpoint_key(binding), [created, claim, done, delivery, delivered])
        )
    return calls


def through_store(store: SQLiteStore, call: Call) -> None:
    """The guarded call through the store."""
    binding, key, (created, *writes) = call
    store.create_if_absent(key, created)
    raw = store.get(key)
    assert raw is not None
    assert decide_checkpoint(raw, binding).action is Action.EXECUTE
    for record in writes:
        if not store.compare_and_swap(key, record.revision - 1, record):
            raise AssertionError("a CAS on a key of its own lost")


class Raw:
    """The store's statements by hand, on a connection with the store's pragmas."""

    INSERT = (
        "INSERT INTO tec_checkpoint"
        " (key, revision, status, namespace, call_id, updated_at, updated_us, record)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING"
    )
    UPDATE = (
        "UPDATE tec_checkpoint SET revision = ?, status = ?, namespace = ?, call_id = ?,"
        " updated_at = ?, updated_us = ?, record = ? WHERE key = ? AND revision = ?"
    )

    def __init__(self, path: Path) -> None:
        SQLiteStore(path).close()  # the same schema
        self.db = sqlite3.connect(path, timeout=5.0, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA fullfsync=ON")

    def write(self, statement: str, parameters: tuple[object, ...]) -> bool:
        self.db.execute("BEGIN IMMEDIATE")
        if self.db.execute(statement, parameters).rowcount != 1:
            self.db.execute("ROLLBACK")
            return False
        self.db.execute("COMMIT")
        return True

    @staticmethod
    def columns(record: Checkpoint) -> tuple[object, ...]:
        return (
            record.revision,
            record.status.value,
            record.binding.namespace,
            record.binding.call_id,
            record.updated_at,
            timestamp_microseconds(record.updated_at),
            record.to_json(),
        )

    def call(self, call: Call) -> None:
        binding, key, (created, *writes) = call
        self.write(self.INSERT, (key, *self.columns(created)))
        row = self.db.execute("SELECT record FROM tec_checkpoint WHERE key = ?", (key,))
        assert decide_checkpoint(json.loads(row.fetchone()[0]), binding).action is Action.EXECUTE
        for record in writes:
            columns = self.columns(record)
            if not self.write(self.UPDATE, (*columns, key, record.revision - 1)):
                raise AssertionError("a CAS on a key of its own lost")

    def close(self) -> None:
        self.db.close()


def versus_raw(directory: Path, calls: int) -> dict[str, float]:
    """Raw and store calls one after the other, alternating which goes first, so both see
    the same disk; return each side's calls per second (wall clock), its median time per
    call, and its CPU time per call (which leaves out the wait for fsync)."""
    raw, store = Raw(directory / "raw.db"), SQLiteStore(directory / "store.db")
    raw_calls, store_calls = prepare("raw", calls), prepare("store", calls)
    raw.call(prepare("warm-raw", 1)[0])
    through_store(store, prepare("warm-store", 1)[0])
    cpu = {"raw": 0.0, "store": 0.0}
    pending = {"raw": iter(raw_calls), "store": iter(store_calls)}
    runs: dict[str, Callable[[Call], None]] = {
        "raw": raw.call,
        "store": functools.partial(through_store, store),
    }

    def one(side: str) -> float:
        """One call of ``side``; its wall time (its CPU time is added to ``cpu``)."""
        call = next(pending[side])
        wall, processor = time.perf_counter(), time.process_time()
        runs[side](call)
        cpu[side] += time.process_time() - processor
        return time.perf_counter() - wall

    walls = paired_rounds({side: functools.partial(one, side) for side in runs}, calls)
    raw.close()
    store.close()
    results = {}
    for side in ("raw", "store"):
        results[f"{side}_calls_per_second"] = calls / sum(walls[side])
        results[f"{side}_median_ms"] = statistics.median(walls[side]) * 1_000
        results[f"{side}_cpu_ms"] = cpu[side] / calls * 1_000
    return results


def threaded(directory: Path, threads: int, calls_each: int) -> float:
    """Calls per second through one store shared by ``threads`` threads, distinct keys."""
    store = SQLiteStore(directory / f"threads-{threads}.db")
    work = [prepare(f"t{threads}-{number}", calls_each) for number in range(threads)]
    start = threading.Barrier(threads + 1)

    def worker(calls: list[Call]) -> None:
        start.wait()
        for call in calls:
            through_store(store, call)

    pool = [threading.Thread(target=worker, args=(calls,)) for calls in work]
    for thread in pool:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - began
    store.close()
    return threads * calls_each / elapsed


def hot_key(directory: Path, threads: int, rounds: int) -> dict[str, float]:
    """Rounds per second when ``threads`` threads run each call on the same key: all
    create, load and decide, then all CAS the claim at revision 1; one wins and finishes."""
    store = SQLiteStore(directory / "hot.db")
    calls = prepare("hot", rounds)
    loaded = threading.Barrier(threads)
    outcomes = {"won": 0, "lost": 0}
    lock = threading.Lock()

    def worker(number: int) -> None:
        me = f"attempt-{number}"
        for binding, key, (created, *_) in calls:
            store.create_if_absent(key, created)
            raw = store.get(key)
            assert raw is not None
            decision = decide_checkpoint(raw, binding)
            claim = claim_execution(decision.checkpoint, attempt_id=me, at=NOW)
            loaded.wait()  # every thread holds a claim at revision 1
            won = store.compare_and_swap(key, claim.expected_revision, claim.next)
            with lock:
                outcomes["won" if won else "lost"] += 1
            if won:
                done = complete_execution(claim.next, attempt_id=me, at=NOW, result=PAYLOAD)
                delivery = claim_delivery(done.next, delivery_id=me, at=NOW)
                delivered = complete_delivery(delivery.next, delivery_id=me, at=NOW)
                for step in (done, delivery, delivered):
                    assert store.compare_and_swap(key, step.expected_revision, step.next)
            loaded.wait()  # the round is over

    pool = [threading.Thread(target=worker, args=(number,)) for number in range(threads)]
    began = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - began
    store.close()
    if outcomes["won"] != rounds or outcomes["lost"] != rounds * (threads - 1):
        raise AssertionError(f"expected one winner per round, got {outcomes}")
    return {"calls_per_second": rounds / elapsed, **outcomes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=400, help="calls per side and scenario")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tec-bench-") as name:
        directory = Path(name)
        paired = versus_raw(directory, args.calls)
        one = threaded(directory, 1, args.calls)
        eight = threaded(directory, 8, max(1, args.calls // 8))
        hot = hot_key(directory, 8, max(1, args.calls // 4))
    ratio = paired["raw_calls_per_second"] / paired["store_calls_per_second"]
    median_ratio = paired["store_median_ms"] / paired["raw_median_ms"]
    cpu_ratio = paired["store_cpu_ms"] / paired["raw_cpu_ms"]
    print(f"guarded calls (1 read, 5 durable commits, 1 KiB payload), {args.calls} per scenario")
    print(f"{'scenario':<42} {'calls/s':>8} {'ms/call':>8} {'median':>7} {'CPU ms':>7}")
    for side, label in (
        ("raw", "raw sqlite3, same statements (baseline)"),
        ("store", "SQLiteStore"),
    ):
        print(
            f"{label:<42} {paired[f'{side}_calls_per_second']:>8.0f}"
            f" {1_000 / paired[f'{side}_calls_per_second']:>8.2f}"
            f" {paired[f'{side}_median_ms']:>7.2f} {paired[f'{side}_cpu_ms']:>7.3f}"
        )
    verdict = "met" if median_ratio <= TARGET_RATIO else "NOT met"
    print(
        f"{'store / raw':<42} {ratio:>7.2f}x {'':>8} {median_ratio:>6.2f}x {cpu_ratio:>6.2f}x"
        f"  target <= {TARGET_RATIO}x on the median: {verdict}"
    )
    print()
    print(f"{'scenario':<42} {'calls/s':>8} {'ms/call':>8}  note")
    rows = [
        ("SQLiteStore, 1 thread", one, ""),
        ("SQLiteStore, 8 threads, distinct keys", eight, f"{eight / one:.2f}x 1 thread"),
        (
            "SQLiteStore, 8 threads, one hot key",
            hot["calls_per_second"],
            f"{hot['lost']} of {hot['won'] + hot['lost']} claims lost",
        ),
    ]
    for label, rate, note in rows:
        print(f"{label:<42} {rate:>8.0f} {1_000 / rate:>8.2f}  {note}")
    results: dict[str, Any] = {
        "calls": args.calls,
        **{name: round(value, 3) for name, value in paired.items()},
        "store_time_ratio": round(ratio, 3),
        "store_median_ratio": round(median_ratio, 3),
        "store_cpu_ratio": round(cpu_ratio, 3),
        "target_ratio": TARGET_RATIO,
        "target_met": median_ratio <= TARGET_RATIO,
        "threads_1_calls_per_second": round(one, 1),
        "threads_8_calls_per_second": round(eight, 1),
        "hot_key_8_threads_calls_per_second": round(hot["calls_per_second"], 1),
        "hot_key_claims_won": hot["won"],
        "hot_key_claims_lost": hot["lost"],
        "sqlite_version": sqlite3.sqlite_version,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
