"""The counting pass of peers.py: what one subject makes the server do per call.

Each subject is counted alone, through a TCP proxy (_proxy.py), at the same worker
counts as it is timed:

- round trips per call: the proxy's turns of the conversation, whatever the driver;
- PostgreSQL: write transactions per call (transaction ids used: a read uses none) and
  WAL fsyncs per call (``pg_stat_wal.wal_sync``: every process's WAL fsyncs, backends'
  commits and the WAL writer's background flushes alike). Backends report their counters
  late, so that figure comes from a pass of its own: a fresh instance makes the calls
  and closes, and the counter is read once its backends have exited (a backend reports
  at exit) and the WAL is flushed to its end. A durable commit waits for one fsync of its own
  with one caller, and shares one with other callers' commits at 8 (group commit); a
  relaxed commit waits for none (the WAL writer flushes it within ``wal_writer_delay``);
- Redis: commands per call and write commands per call (``INFO commandstats``, those run
  inside Lua scripts included; a write command is one whose ``COMMAND INFO`` flags say
  write, whether or not it changed anything), AOF bytes per call (``aof_current_size``),
  and fsyncs per call: Redis counts none (``INFO persistence`` has no fsync counter in
  Redis 7), so they are the ``fdatasync``/``fsync`` calls of the server's process counted
  by ``strace -c`` while the subject runs (left out, with a note, when strace is
  missing or may not attach). With appendfsync always, Redis fsyncs once per event-loop
  turn in which a command changed the data, before it answers: a write that changed
  nothing needs none, and concurrent writes share one.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import psycopg
import redis
from _drive import Opener, timed, warm
from _proxy import CountingProxy

if TYPE_CHECKING:
    from redis_server import RedisServer

__all__ = ["count_postgres", "count_redis"]


# --- counting: PostgreSQL ------------------------------------------------------------------


def _scalar(connection: psycopg.Connection[Any], query: str) -> Any:
    row = connection.execute(query.encode()).fetchone()
    assert row is not None
    return row[0]


def _next_xid(admin_url: str) -> int:
    """The next transaction id: it moves by one for each transaction that writes, and
    not for reads."""
    with psycopg.connect(admin_url, autocommit=True) as connection:
        return int(_scalar(connection, "SELECT pg_snapshot_xmax(pg_current_snapshot())"))


def _settled_wal(admin_url: str, timeout: float = 30.0) -> dict[str, int]:
    """``pg_stat_wal``'s counters once no other client is connected (a backend reports
    its pending counters when it exits, before it leaves pg_stat_activity) and the WAL is
    flushed up to its end (the WAL writer reports its flushes as it makes them)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(admin_url, autocommit=True) as connection:
        while True:
            others = _scalar(
                connection,
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            )
            flushed = _scalar(
                connection, "SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()"
            )
            if (others == 0 and flushed) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        time.sleep(0.05)  # the WAL writer reports right after its flush
        row = connection.execute(b"SELECT wal_sync, wal_write FROM pg_stat_wal").fetchone()
        sync, write = cast(tuple[Any, Any], row)
    return {"wal_syncs": int(sync), "wal_writes": int(write)}


def _minus(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in after}


def count_postgres(
    opener: Opener, proxy: CountingProxy, admin_url: str, workers: int, calls: int
) -> dict[str, Any]:
    """Round trips, write transactions and WAL fsyncs per call of one subject, alone.

    Round trips and transaction ids are counted around the calls of a warmed instance.
    The WAL fsyncs are counted around a whole instance (backends report theirs when they
    exit), opened cold for the calls alone: opening connections and preparing
    statements write no WAL."""
    with opener() as subject:
        warm(subject, workers)
        time.sleep(0.05)
        xid = _next_xid(admin_url)
        proxy.reset()
        timed(subject, workers, calls)
        trips = proxy.round_trips
        transactions = _next_xid(admin_url) - xid
    start = _settled_wal(admin_url)
    with opener() as subject:
        timed(subject, workers, calls)
    wal = _minus(_settled_wal(admin_url), start)
    total = workers * calls
    return {
        "round_trips_per_call": round(trips / total, 2),
        "write_transactions_per_call": round(transactions / total, 2),
        "wal_fsyncs_per_call": round(wal["wal_syncs"] / total, 2),
        "wal_writes_per_call": round(wal["wal_writes"] / total, 2),
    }


# --- counting: Redis ---------------------------------------------------------------------


class FsyncCount:
    """``with FsyncCount(pid) as count:`` the fdatasync and fsync calls of process ``pid``
    (all its threads) during the block, counted by ``strace -c``; ``count.calls`` is None
    when strace is missing or could not attach (``count.problem`` says why)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.calls: int | None = None
        self.problem = ""
        self._process: subprocess.Popen[str] | None = None
        self._directory = tempfile.TemporaryDirectory(prefix="tec-bench-strace-")
        self._output = Path(self._directory.name) / "summary.txt"

    def __enter__(self) -> FsyncCount:
        strace = shutil.which("strace")
        if strace is None:
            self.problem = "strace is not installed"
            return self
        command = [strace, "-f", "-c", "-e", "trace=fsync,fdatasync"]
        command += ["-o", str(self._output), "-p", str(self.pid)]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        line = process.stderr.readline()  # "strace: Process N attached with M threads"
        if "attached" not in line:
            process.kill()
            process.wait()
            self.problem = f"strace could not attach: {line.strip()}"
            return self
        self._process = process
        return self

    def __exit__(self, *exception: object) -> None:
        process = self._process
        if process is None:
            self._directory.cleanup()
            return
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        calls = 0
        for line in self._output.read_text(encoding="utf-8").splitlines():
            fields = line.split()
            if fields and fields[-1] in ("fsync", "fdatasync"):
                calls += int(fields[3])
        self.calls = calls
        self._directory.cleanup()


class RedisCounters:
    """The server's own counts on ``client``: commands, write commands (by their
    ``COMMAND INFO`` flags) and the AOF's size."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.writes: dict[str, bool] = {}

    def _is_write(self, name: str) -> bool:
        if name not in self.writes:
            info: Any = cast(Any, self.client).execute_command("COMMAND", "INFO", name)
            flags = info.get(name, {}).get("flags", []) if isinstance(info, dict) else []
            self.writes[name] = "write" in [str(flag) for flag in flags]
        return self.writes[name]

    def read(self) -> dict[str, int]:
        stats: dict[str, Any] = self.client.info("commandstats")
        calls = {key.removeprefix("cmdstat_"): int(value["calls"]) for key, value in stats.items()}
        aof: dict[str, Any] = self.client.info("persistence")
        return {
            "commands": sum(calls.values()),
            "write_commands": sum(n for name, n in calls.items() if self._is_write(name)),
            "aof_bytes": int(aof["aof_current_size"]),
        }


def count_redis(
    opener: Opener, proxy: CountingProxy, server: RedisServer, workers: int, calls: int
) -> dict[str, Any]:
    """Round trips, commands, write commands, AOF bytes and fsyncs per call of one
    subject, alone. The counters' own commands (INFO, measured with nothing between)
    are subtracted."""
    watcher = server.client()
    counters = RedisCounters(watcher)
    try:
        counters.read()  # every command name seen so far is classified
        first = counters.read()
        idle = _minus(counters.read(), first)
        with opener() as subject:
            warm(subject, workers)
            counters.read()
            with FsyncCount(server.process.pid) as fsyncs:
                before = counters.read()
                proxy.reset()
                timed(subject, workers, calls)
                trips = proxy.round_trips
                # A delivered mark sent unanswered (run_once's last write) may still be
                # on its way when the last call returns: let the server read it first.
                time.sleep(0.05)
                work = _minus(_minus(counters.read(), before), idle)
    finally:
        watcher.close()
    total = workers * calls
    return {
        "round_trips_per_call": round(trips / total, 2),
        "commands_per_call": round(work["commands"] / total, 2),
        "write_commands_per_call": round(work["write_commands"] / total, 2),
        "aof_bytes_per_call": round(work["aof_bytes"] / total),
        "fsyncs_per_call": None if fsyncs.calls is None else round(fsyncs.calls / total, 2),
        "fsyncs_not_counted": fsyncs.problem,
    }
