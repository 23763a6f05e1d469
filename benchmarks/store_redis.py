"""Guarded calls per second through RedisStore, against the same work done with raw
redis-py on the same server in the same run.

One guarded call is the whole lifecycle of one tool call: create if absent, get and
decide, the claim CAS, the completing CAS with a 1 KiB payload, the delivery claim CAS
and the delivered CAS. The baseline runs the same core transitions and sends the same
Lua scripts (EVALSHA through redis-py's ``register_script``) and the same HGET with
plain redis-py, without the store: the ratio is what the store costs on top. The server
is started here (tests/redis_server.py) with ``appendonly yes`` and ``appendfsync
always``, so every write waits for an fsync, as in production, except the delivered mark,
which the store by default does not append to the AOF (the baseline sends the same
relaxed script for it).

Modes: 1 thread on distinct keys, 8 threads on distinct keys, and 8 threads on a hot
key (all 8 run the protocol on the same key at once; one wins each claim; a "call" is
one key served). Round trips per call are counted by the server (MONITOR). With every
write waiting for an fsync, the disk's jitter dominates the rates, so rounds alternate
and the cost is the median of the paired ratios (store and baseline run back to back, in
alternating order), together with this process's CPU time per call (the client's own
cost, which the disk does not blur).

    python benchmarks/store_redis.py [--calls N] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, cast

import redis
from _measure import paired_rounds

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from redis_server import RedisServer, start_redis_server, stop_redis_server
from tool_execution_checkpoint import (
    Action,
    Binding,
    Checkpoint,
    Status,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
)
from tool_execution_checkpoint.stores.redis import SCRIPTS, RedisStore
from tool_execution_checkpoint.validation import timestamp_microseconds

NOW = "2026-01-01T00:00:00Z"
PAYLOAD = {"data": "x" * (1024 - len('{"data":""}'))}
assert len(json.dumps(PAYLOAD, separators=(",", ":"))) == 1024


class Backend(Protocol):
    """What one guarded call needs from storage."""

    def create_if_absent(self, key: str, record: Checkpoint) -> bool: ...

    def get(self, key: str) -> Mapping[str, Any] | None: ...

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool: ...


class RawRedis:
    """The baseline: the store's scripts and HGET sent with plain redis-py, with the
    arguments computed the same way, and none of the store's checks or error handling."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.create = client.register_script(SCRIPTS["create"])
        self.swap = client.register_script(SCRIPTS["swap"])
        # The store's default: a delivered mark's effects are not appended to the AOF.
        self.swap_relaxed = client.register_script(SCRIPTS["swap_relaxed"])
        self.indexes = {status: f"{prefix}idx:{status.value}" for status in Status}

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        args = [
            record.revision,
            record.status.value,
            timestamp_microseconds(record.updated_at),
            record.to_json(),
            key,
        ]
        keys = [self.prefix + "rec:" + key, self.indexes[record.status]]
        return bool(self.create(keys=keys, args=args))

    def get(self, key: str) -> Mapping[str, Any] | None:
        text = cast(bytes | None, self.client.hget(self.prefix + "rec:" + key, "record"))
        return None if text is None else cast(dict[str, Any], json.loads(text))

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        args: list[str | int] = [
            expected_revision,
            record.revision,
            record.status.value,
            timestamp_microseconds(record.updated_at),
            record.to_json(),
            key,
        ]
        keys = [self.prefix + "rec:" + key, *self.indexes.values()]
        swap = self.swap_relaxed if record.status is Status.DELIVERED else self.swap
        return bool(swap(keys=keys, args=args))


def guarded_call(backend: Backend, binding: Binding, me: str, ran: Counter[str]) -> None:
    """The host protocol for one call, as README's quick start runs it."""
    key = checkpoint_key(binding)
    backend.create_if_absent(key, create_checkpoint(binding, created_at=NOW))
    raw = backend.get(key)
    assert raw is not None
    decision = decide_checkpoint(raw, binding)
    record = decision.checkpoint
    if decision.action is Action.EXECUTE:
        claim = claim_execution(record, attempt_id=me, at=NOW)
        if not backend.compare_and_swap(key, claim.expected_revision, claim.next):
            return
        ran[binding.call_id] += 1
        done = complete_execution(claim.next, attempt_id=me, at=NOW, result=PAYLOAD)
        if not backend.compare_and_swap(key, done.expected_revision, done.next):
            return
        record = done.next
    if record.status is Status.COMPLETED:
        delivery = claim_delivery(record, delivery_id=me, at=NOW)
        if not backend.compare_and_swap(key, delivery.expected_revision, delivery.next):
            return
        finish = complete_delivery(delivery.next, delivery_id=me, at=NOW)
        backend.compare_and_swap(key, finish.expected_revision, finish.next)


def run_mode(make: Callable[[str], Backend], mode: str, calls: int) -> tuple[float, float]:
    """Calls per second of ``mode`` on a fresh prefix, and this process's CPU time per
    call in microseconds (all threads; the wait for Redis and its fsync excluded)."""
    backend = make(f"bench-{uuid.uuid4().hex}:")
    run = uuid.uuid4().hex
    ran: Counter[str] = Counter()
    lock = threading.Lock()
    cpu = time.process_time()
    if mode == "1 thread":
        start = time.perf_counter()
        for number in range(calls):
            guarded_call(backend, Binding("bench", f"{run}-{number}", "t", "1", "f"), "w", ran)
        elapsed = time.perf_counter() - start
    else:
        threads = 8
        hot = mode.endswith("hot key")
        barrier = threading.Barrier(threads)
        per_thread = calls if hot else calls // threads
        counters = [Counter[str]() for _ in range(threads)]

        def work(index: int) -> None:
            barrier.wait()
            for number in range(per_thread):
                call = number if hot else index * per_thread + number
                if hot:
                    barrier.wait()  # all 8 contend for the same key at once
                binding = Binding("bench", f"{run}-{call}", "t", "1", "f")
                guarded_call(backend, binding, f"w{index}-{number}", counters[index])

        pool = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
        start = time.perf_counter()
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        elapsed = time.perf_counter() - start
        with lock:
            for counter in counters:
                ran.update(counter)
        calls = per_thread if hot else per_thread * threads
    cpu = time.process_time() - cpu
    assert len(ran) == calls, f"{mode}: {calls - len(ran)} calls never ran"
    assert max(ran.values()) == 1, f"{mode}: a tool ran twice"
    return calls / elapsed, cpu / calls * 1e6


class _Monitor(Protocol):
    def __enter__(self) -> _Monitor: ...

    def __exit__(self, *exc_info: object) -> None: ...

    def next_command(self) -> dict[str, Any]: ...


def round_trips(server: RedisServer, make: Callable[[str], Backend], calls: int) -> float:
    """Top-level commands per guarded call that the server saw (MONITOR), one thread."""
    backend = make(f"bench-{uuid.uuid4().hex}:")
    run = uuid.uuid4().hex
    ran: Counter[str] = Counter()
    guarded_call(backend, Binding("bench", f"{run}-warm", "t", "1", "f"), "w", ran)
    watcher = redis.Redis(host=server.host, port=server.port, password=server.password, protocol=2)
    marker = server.client()
    count = 0
    with cast(Callable[[], _Monitor], watcher.monitor)() as monitor:
        marker.echo("start-marker")
        while "start-marker" not in monitor.next_command()["command"]:
            pass
        for number in range(calls):
            guarded_call(backend, Binding("bench", f"{run}-{number}", "t", "1", "f"), "w", ran)
        marker.echo("end-marker")
        while "end-marker" not in (command := monitor.next_command())["command"]:
            count += command["client_type"] != "lua"
    watcher.close()
    marker.close()
    return count / calls


MODES = ("1 thread", "8 threads, distinct keys", "8 threads, hot key")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="guarded calls per measurement")
    parser.add_argument("--rounds", type=int, default=9, help="paired rounds; medians")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    directory = Path(tempfile.mkdtemp(prefix="store-redis-bench-"))
    server = start_redis_server(directory)
    store_client = redis.Redis.from_url(server.url())  # shared by the stores, not owned
    raw_client = redis.Redis.from_url(server.url())
    try:

        def make_store(prefix: str) -> Backend:
            return RedisStore(store_client, prefix=prefix)

        def make_raw(prefix: str) -> Backend:
            return RawRedis(raw_client, prefix)

        settings = RedisStore(store_client).check_durability()
        results: dict[str, Any] = {
            "calls_per_measurement": args.calls,
            "rounds": args.rounds,
            "payload_bytes": 1024,
            "server": {
                "version": store_client.info("server")["redis_version"],
                "appendonly": settings.appendonly,
                "appendfsync": settings.appendfsync,
            },
            "redis_py": redis.__version__,
            "modes": {},
        }
        for mode in MODES:
            run_mode(make_store, mode, max(16, args.calls // 10))  # warm up both
            run_mode(make_raw, mode, max(16, args.calls // 10))
            # Back to back, in alternating order: each pair sees the same disk.
            runs = paired_rounds(
                {
                    "store": functools.partial(run_mode, make_store, mode, args.calls),
                    "raw": functools.partial(run_mode, make_raw, mode, args.calls),
                },
                args.rounds,
            )
            store_runs, raw_runs = runs["store"], runs["raw"]
            store_rate = statistics.median(rate for rate, _ in store_runs)
            raw_rate = statistics.median(rate for rate, _ in raw_runs)
            store_cpu = statistics.median(cpu for _, cpu in store_runs)
            raw_cpu = statistics.median(cpu for _, cpu in raw_runs)
            paired = statistics.median(
                raw / store for (store, _), (raw, _) in zip(store_runs, raw_runs, strict=True)
            )
            results["modes"][mode] = {
                "store_calls_per_second": round(store_rate, 1),
                "baseline_calls_per_second": round(raw_rate, 1),
                "store_cost_vs_baseline": round(paired, 3),
                "store_cpu_vs_baseline": round(store_cpu / raw_cpu, 3),
                "store_rounds": [round(rate, 1) for rate, _ in store_runs],
                "baseline_rounds": [round(rate, 1) for rate, _ in raw_runs],
                "store_client_cpu_us_per_call": round(store_cpu, 1),
                "baseline_client_cpu_us_per_call": round(raw_cpu, 1),
            }
        results["round_trips_per_call"] = {
            "store": round(round_trips(server, make_store, 50), 2),
            "baseline": round(round_trips(server, make_raw, 50), 2),
        }
    finally:
        store_client.close()
        raw_client.close()
        stop_redis_server(server)

    print(
        f"redis-server {results['server']['version']} (appendonly "
        f"{results['server']['appendonly']}, appendfsync {results['server']['appendfsync']}),"
        f" redis-py {results['redis_py']}; medians of {args.rounds} paired rounds of {args.calls}"
        " calls"
    )
    print(
        f"{'mode':<28}{'store calls/s':>15}{'raw calls/s':>13}{'x baseline':>12}"
        f"{'store CPU us':>14}{'raw CPU us':>12}"
    )
    for mode, row in results["modes"].items():
        print(
            f"{mode:<28}{row['store_calls_per_second']:>15.1f}"
            f"{row['baseline_calls_per_second']:>13.1f}{row['store_cost_vs_baseline']:>12.3f}"
            f"{row['store_client_cpu_us_per_call']:>14.1f}"
            f"{row['baseline_client_cpu_us_per_call']:>12.1f}"
        )
    trips = results["round_trips_per_call"]
    print(f"round trips per guarded call: store {trips['store']}, baseline {trips['baseline']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
