"""Where a guarded call's time goes on Redis: ``run_once`` on RedisStore against
aws-lambda-powertools, the fastest peer with one worker, split into what each spends.

Not part of ``make bench``: it explains the Redis rows of ``benchmarks/peers.py``. One
caller, on a throwaway Redis started here with ``appendonly yes`` and ``appendfsync
always`` (as peers.py runs it), the library's defaults (contracts off unless
``TOOL_CHECKPOINT_CONTRACTS=1``). Each side is measured as the client process's CPU time
per call (``time.process_time``) and as wall time per call, each over paired rounds in an
order that rotates each round, and reported as its median:

- ``run_once, RedisStore`` and ``powertools``: the whole guarded call, as in peers.py;
- ``run_once, no I/O``: ``run_once`` on a store that builds each command exactly as
  RedisStore does (the record checked and encoded, the script's keys and arguments) and
  sends none: the library's own Python per call, without redis-py and the socket;
- ``the store's 3 writes``: the three writes ``run_once`` makes for a call (recorded
  from it once, before the rounds: stores.recorded_call), replayed through RedisStore:
  the store, redis-py and the socket;
- ``@checkpointed, RedisStore``, ``@checkpointed, no I/O`` and ``the guard's 2 writes``:
  the same three for the one-line guard (its two writes, the second the hand-back step);
- ``powertools' 2 SETs``: the two commands powertools sends (``SET NX EX`` of its
  in-progress item, ``SET EX`` of its result, values of the sizes it writes) through
  redis-py, with none of powertools.

No side runs a copy of the host protocol: ``run_once`` drives every store side, and the
store's writes alone are the ones it made.

The server's side, from ``INFO commandstats`` over a pass of its own per subject: the
commands the server ran per call (those inside a script included) and its microseconds
of command time per call (``usec``, the time its commands ran, not its I/O or fsyncs).

    python benchmarks/redis_breakdown.py [--quick] [--json PATH]
"""

from __future__ import annotations

import functools
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis
from _calls import guard_sync, powertools_call, tec_sync
from _drive import PAYLOAD, Ran
from _measure import main_of, paired_rounds
from stores import Recorder, binding_of, recorded_call, replay

from tool_execution_checkpoint import Checkpoint, hand_back, run_once
from tool_execution_checkpoint.stores.redis import RedisStore
from tool_execution_checkpoint.transitions import CONTRACTS_ENABLED

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from redis_server import start_redis_server, stop_redis_server


class Unsent:
    """A store that builds RedisStore's commands and sends none: every write lands."""

    def __init__(self, store: RedisStore) -> None:
        self._layout = store._layout

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        self._layout.create(key, record).send(None)
        return True

    def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        self._layout.swap(key, expected_revision, record, durable=durable).send(None)
        return True

    def get(self, key: str) -> None:
        del key
        raise AssertionError("a call whose writes all land reads nothing")


def guard_writes(store: RedisStore) -> Callable[[str], None]:
    """The two writes the guard makes for one call (run_once with the hand-back on a
    Recorder, before the rounds), replayed on each job's key."""
    recorder = Recorder()
    outcome = run_once(recorder, binding_of("job"), lambda: PAYLOAD, hand_back)
    if outcome.payload != PAYLOAD or len(recorder.writes) != 2:
        raise AssertionError("the guard did not make one call's two writes")
    writes = recorder.writes

    def call(key: str) -> None:
        replay(store, key, writes)

    return call


def store_writes(store: RedisStore) -> Callable[[str], None]:
    """The writes run_once made for one call (recorded before the rounds), replayed on
    each job's key: the store's writes alone, not a copy of the protocol."""
    _, writes = recorded_call("job")

    def call(key: str) -> None:
        replay(store, key, writes)

    return call


def powertools_sets(client: redis.Redis) -> Callable[[str], None]:
    # The sizes powertools writes: its in-progress item, then the item with the result.
    in_progress = json.dumps({"status": "INPROGRESS", "expiration": 0, "in_progress": 0})
    completed = json.dumps({"status": "COMPLETED", "data": json.dumps(PAYLOAD)})

    def call(key: str) -> None:
        client.set(key, in_progress, nx=True, ex=3600)
        client.set(key, completed, ex=3600)

    return call


def cpu_per_call(call: Callable[[str], None], jobs: Iterator[str], count: int) -> float:
    started = time.process_time()
    for _ in range(count):
        call(next(jobs))
    return (time.process_time() - started) / count


def wall_per_call(call: Callable[[str], None], jobs: Iterator[str], count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        call(next(jobs))
    return (time.perf_counter() - started) / count


def server_per_call(
    admin: redis.Redis, call: Callable[[str], None], jobs: Iterator[str], count: int
) -> dict[str, float]:
    admin.config_resetstat()
    for _ in range(count):
        call(next(jobs))
    time.sleep(0.05)  # the last delivered mark, sent unanswered, reaches the server
    stats: dict[str, dict[str, float]] = admin.info("commandstats")
    mine = {name: row for name, row in stats.items() if name != "cmdstat_config|resetstat"}
    mine = {name: row for name, row in mine.items() if not name.startswith("cmdstat_info")}
    return {
        "commands": sum(row["calls"] for row in mine.values()) / count,
        "usec": sum(row["usec"] for row in mine.values()) / count,
    }


def measure(quick: bool) -> dict[str, Any]:
    count, rounds = (200, 3) if quick else (1000, 15)
    with tempfile.TemporaryDirectory(prefix="tec-bench-breakdown-") as name:
        server = start_redis_server(Path(name) / "redis")
        try:
            ran = Ran()
            store = RedisStore.from_url(server.url(), prefix="tec-breakdown:")
            client = redis.Redis.from_url(server.url())
            admin = server.client()
            sides = {
                "run_once, RedisStore": tec_sync(store, ran),
                "powertools": powertools_call(client, ran),
                "run_once, no I/O": tec_sync(Unsent(store), ran),
                "the store's 3 writes": store_writes(store),
                "powertools' 2 SETs": powertools_sets(client),
                "@checkpointed, RedisStore": guard_sync(store, ran),
                "@checkpointed, no I/O": guard_sync(Unsent(store), ran),
                "the guard's 2 writes": guard_writes(store),
            }
            # each side its own job ids (a generator expression would read ``n`` late)
            jobs = {
                side: map(f"{n}-0-{{}}".format, itertools.count()) for n, side in enumerate(sides)
            }
            for side, call in sides.items():  # connections, scripts and caches warmed
                cpu_per_call(call, jobs[side], count // 4)
            samples, walls = (
                paired_rounds(
                    {
                        side: functools.partial(per_call, call, jobs[side], count)
                        for side, call in sides.items()
                    },
                    rounds,
                )
                for per_call in (cpu_per_call, wall_per_call)
            )
            servers = {
                side: server_per_call(admin, sides[side], jobs[side], count)
                for side in ("run_once, RedisStore", "@checkpointed, RedisStore", "powertools")
            }
            version = admin.info("server")["redis_version"]
            store.close()
            client.close()
            admin.close()
        finally:
            stop_redis_server(server)
    return {
        "client_cpu_us_per_call": {
            side: round(statistics.median(values) * 1e6, 1) for side, values in samples.items()
        },
        "wall_us_per_call": {
            side: round(statistics.median(values) * 1e6, 1) for side, values in walls.items()
        },
        "server_per_call": servers,
        "server": f"Redis {version}, appendonly yes, appendfsync always",
        "contracts_enabled": CONTRACTS_ENABLED,
        "calls_per_round": count,
        "rounds": rounds,
    }


def report(results: dict[str, Any]) -> None:
    cpu, wall = results["client_cpu_us_per_call"], results["wall_us_per_call"]
    print(f"per call, median of {results['rounds']} paired rounds: client CPU, wall (µs):")
    for side, value in cpu.items():
        print(f"  {side:<28} {value:8.1f} {wall[side]:8.1f}")
    outside = {
        "run_once outside its writes": ("run_once, RedisStore", "the store's 3 writes"),
        "the guard outside its writes": ("@checkpointed, RedisStore", "the guard's 2 writes"),
        "powertools outside its SETs": ("powertools", "powertools' 2 SETs"),
    }
    for label, (whole, part) in outside.items():
        print(f"  {label:<28} {cpu[whole] - cpu[part]:8.1f} {wall[whole] - wall[part]:8.1f}")
    print("server, per call:")
    for side, row in results["server_per_call"].items():
        print(f"  {side:<24} {row['commands']:5.1f} commands, {row['usec']:6.1f} µs")
    print(results["server"], "; contracts", "on" if results["contracts_enabled"] else "off")


if __name__ == "__main__":
    main_of(__doc__, measure, report)
