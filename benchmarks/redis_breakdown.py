"""Where a guarded call's time goes on Redis: ``run_once`` on RedisStore against
aws-lambda-powertools, the fastest peer with one worker, split into what each spends.

Not part of ``make bench``: it explains the Redis rows of ``benchmarks/peers.py``. One
caller, on a throwaway Redis started here with ``appendonly yes`` and ``appendfsync
always`` (as peers.py runs it), the library's defaults (contracts off unless
``TOOL_CHECKPOINT_CONTRACTS=1``). Each side is measured as the client process's CPU time
per call (``time.process_time``), over paired rounds in an order that rotates each
round, and reported as its median:

- ``run_once, RedisStore`` and ``powertools``: the whole guarded call, as in peers.py;
- ``run_once, no I/O``: ``run_once`` on a store that builds each command exactly as
  RedisStore does (the record checked and encoded, the script's keys and arguments) and
  sends none: the library's own Python per call, without redis-py and the socket;
- ``the store's 3 writes``: the three writes ``run_once`` makes for a call (recorded
  from it once, before the rounds: stores.recorded_call), replayed through RedisStore:
  the store, redis-py and the socket;
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
from _calls import powertools_call, tec_sync
from _drive import PAYLOAD, Ran
from _measure import main_of, paired_rounds
from stores import recorded_call, replay

from tool_execution_checkpoint import Checkpoint
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


def server_per_call(
    admin: redis.Redis, call: Callable[[str], None], jobs: Iterator[str], count: int
) -> dict[str, float]:
    admin.config_resetstat()
    for _ in range(count):
        call(next(jobs))
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
            }
            jobs = {side: (f"{n}-0-{i}" for i in itertools.count()) for n, side in enumerate(sides)}
            for side, call in sides.items():  # connections, scripts and caches warmed
                cpu_per_call(call, jobs[side], count // 4)
            samples = paired_rounds(
                {
                    side: functools.partial(cpu_per_call, call, jobs[side], count)
                    for side, call in sides.items()
                },
                rounds,
            )
            servers = {
                side: server_per_call(admin, sides[side], jobs[side], count)
                for side in ("run_once, RedisStore", "powertools")
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
        "server_per_call": servers,
        "server": f"Redis {version}, appendonly yes, appendfsync always",
        "contracts_enabled": CONTRACTS_ENABLED,
        "calls_per_round": count,
        "rounds": rounds,
    }


def report(results: dict[str, Any]) -> None:
    cpu = results["client_cpu_us_per_call"]
    print(f"client CPU per call, median of {results['rounds']} paired rounds (µs):")
    for side, value in cpu.items():
        print(f"  {side:<24} {value:8.1f}")
    mine = cpu["run_once, RedisStore"] - cpu["the store's 3 writes"]
    theirs = cpu["powertools"] - cpu["powertools' 2 SETs"]
    print(f"  {'library outside the writes':<24} {mine:8.1f}")
    print(f"  {'powertools outside its SETs':<24} {theirs:8.1f}")
    print("server, per call:")
    for side, row in results["server_per_call"].items():
        print(f"  {side:<24} {row['commands']:5.1f} commands, {row['usec']:6.1f} µs")
    print(results["server"], "; contracts", "on" if results["contracts_enabled"] else "off")


if __name__ == "__main__":
    main_of(__doc__, measure, report)
