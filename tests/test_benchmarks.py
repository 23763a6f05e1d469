"""The benchmarks run end to end in quick mode and write their JSON.

No timing is asserted (the machine is shared): only that ``benchmarks/run_all.py --quick
--only core,validation`` finishes, prints its table and writes every expected figure
with positive numbers, and the same of ``benchmarks/stores.py --quick`` on every store
(its own throwaway servers). The peers part runs quick too when the bench extra is
installed (``make bench`` installs it).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tool_execution_checkpoint import Binding, SQLiteStore, Status, decide_checkpoint

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "benchmarks"))

from _raw import RawSQLite, raw_binding, raw_lifecycle  # noqa: E402

EXPECTED = {
    "core.lifecycle.contracts_on": "µs",
    "core.lifecycle.contracts_off": "µs",
    "core.lifecycle.checks_alone": "µs",
    "core.lifecycle.icontract_floor": "µs",
    "validation.64kib": "µs",
    "validation.10mib": "µs",
    "validation.10mib.peak_peak_rss": "x payload",
    "validation.10mib.peak_tracemalloc": "x payload",
}


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _run_quick(
    script: str, output: Path, environment: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``benchmarks/SCRIPT --quick --json OUTPUT``, which must succeed."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--quick", "--json", str(output)],
        env={**os.environ, **(environment or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_quick_run_writes_every_figure(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run_all.py"),
            "--quick",
            "--only",
            "core,validation",
            "--json",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "targets met:" in done.stdout
    document = json.loads(output.read_text(encoding="utf-8"))
    assert document["quick"] is True
    assert document["parts"] == ["core", "validation"]
    assert set(document["machine"]) >= {"python", "platform", "cpus"}
    figures = document["figures"]
    assert set(figures) == set(EXPECTED)
    for key, unit in EXPECTED.items():
        figure = figures[key]
        assert figure["key"] == key
        assert figure["unit"] == unit
        assert figure["label"] in done.stdout
        for field in ("value", "baseline", "ratio"):
            assert _positive(figure[field]), (key, field, figure[field])
        assert figure["passed"] in (True, False, None)
        if figure["target"] is not None:
            assert _positive(figure["target"])
            assert figure["passed"] is (figure["ratio"] <= figure["target"])
    contracts = document["core"]
    assert contracts["on"]["contracts_enabled"] is True
    assert contracts["off"]["contracts_enabled"] is False
    assert document["validation"]["10mib"]["payload_bytes"] == 10_485_760
    assert document["validation"]["64kib"]["payload_bytes"] == 65_536


# --- run_once on each store (benchmarks/stores.py), in quick mode -------------------------

STORES = ("memory", "sqlite", "postgres", "redis")
STORE_ROWS = {
    "1_worker": ("µs/call", 1.15),
    "8_workers": ("calls/s", 1.15),
    "8_workers_hot_key": ("calls/s", 1.15),
    "1_worker_contracts_off": ("µs/call", 1.15),
    "store_writes.1_worker": ("µs/call", None),
    "store_writes.1_worker_contracts_off": ("µs/call", None),
}


def test_quick_stores_run_has_every_workload_and_the_stores_writes_alone(tmp_path: Path) -> None:
    """``benchmarks/stores.py --quick``: on every store, run_once against the same writes
    sent raw at 1 and 8 workers and on a hot key with the contracts on, at 1 worker with
    them off, and with 1 worker the store's writes alone (run_once's writes replayed
    through the store) against the same raw side; each side's time, rate and client CPU
    per call, positive."""
    output = tmp_path / "stores.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "stores.py"), "--quick", "--json", str(output)],
        env={**os.environ, "TOOL_CHECKPOINT_CONTRACTS": "1"},  # the contracts-on rows
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(output.read_text(encoding="utf-8"))
    figures = document["figures"]
    assert set(figures) == {f"stores.{store}.{row}" for store in STORES for row in STORE_ROWS}
    for key, figure in figures.items():
        unit, target = STORE_ROWS[key.split(".", 2)[2]]
        assert (figure["unit"], figure["target"]) == (unit, target), key
        assert figure["baseline_label"] == "raw statements"
        assert figure["label"] in done.stdout
        for field in ("value", "baseline", "ratio"):
            assert _positive(figure[field]), (key, field, figure[field])
        details = figure["details"]
        assert details["contracts_enabled"] is not key.endswith("contracts_off")
        sides = ("raw", "runner", "writes") if details["workers"] == 1 else ("raw", "runner")
        assert details["ratio"] > 0
        for side in sides:
            for measured in ("us_per_call", "calls_per_second", "cpu_us_per_call"):
                assert _positive(details[f"{side}_{measured}"]), (key, side, measured)
        assert ("writes_us_per_call" in details) is (details["workers"] == 1)
    on, off = document["stores"]["contracts_on"], document["stores"]["contracts_off"]
    assert set(on) == set(off) == set(STORES)
    assert all(set(off[store]) == {"1 worker"} for store in STORES)


def test_the_raw_side_writes_records_the_store_reads(tmp_path: Path) -> None:
    """The raw side sends the store's own statements: what it writes for a call, SQLite
    here, reads back through SQLiteStore as a valid delivered record of the same binding."""
    raw = RawSQLite(tmp_path / "raw.db")
    delivered: list[object] = []
    try:
        assert raw_lifecycle(
            raw,
            "bench/call-1",
            binding=raw_binding("call-1"),
            me="w0",
            tool=lambda: {"data": "x"},
            deliver=delivered.append,
        )
        assert not raw_lifecycle(  # a second caller loses the create and reads the record
            raw,
            "bench/call-1",
            binding=raw_binding("call-1"),
            me="w1",
            tool=lambda: {"data": "y"},
            deliver=delivered.append,
        )
    finally:
        raw.close()
    assert delivered == [{"data": "x"}]
    with SQLiteStore(tmp_path / "raw.db") as store:
        stored = store.get("bench/call-1")
    assert stored is not None
    record = decide_checkpoint(stored, Binding("bench", "call-1", "tool", "1", "sha256:0"))
    assert record.checkpoint.status is Status.DELIVERED
    assert record.checkpoint.result is not None
    assert record.checkpoint.result.payload == {"data": "x"}


# --- the peers (benchmarks/peers.py), in quick mode --------------------------------------

PEER_SUBJECTS = {
    "postgres": [
        "run_once.postgresstore",
        "run_once_async.asyncpostgresstore",
        "@checkpointed.postgresstore",
        "@checkpointed_async.asyncpostgresstore",
        "best_guard",
        "idemkit_sync",
        "idemkit_async",
        "the_same_three_writes.raw",
        "the_first_two_writes.raw",
    ],
    "redis": [
        "run_once.redisstore",
        "run_once_async.asyncredisstore",
        "@checkpointed.redisstore",
        "@checkpointed_async.asyncredisstore",
        "best_guard",
        "idemkit_sync",
        "idemkit_async",
        "powertools_idempotent",
        "powertools_idempotent_function",
        "the_same_three_writes.raw",
        "the_first_two_writes.raw",
    ],
}
PEER_WORKERS = {"1_worker": "µs", "8_workers": "calls/s"}


def _check_peer_figure(key: str, figure: dict[str, Any], peers: dict[str, Any], out: str) -> None:
    """One figure of the peers' quick run: its unit, target, baseline and counts."""
    server, workers = key.split(".")[1:3]
    role = figure["details"]["role"]
    target = {"runner": {"postgres": 1.0, "redis": 1.10}[server], "guard": 1.0}.get(role)
    assert figure["unit"] == PEER_WORKERS[workers]
    assert figure["label"] in out
    for field in ("value", "baseline", "ratio"):
        assert _positive(figure[field]), (key, field, figure[field])
    assert figure["target"] == target
    assert figure["passed"] is (None if target is None else figure["ratio"] <= target)
    timing = peers[server]["workers"][workers.split("_")[0]]
    name = figure["details"]["subject"]
    if role == "guard" and not key.endswith("best_guard"):
        # A guard row against the fastest peer of its own kind (sync or async).
        fastest = timing["fastest_peer_of_kind"][timing["kind"][name]]
        assert timing["kind"][fastest] == timing["kind"][name]
    else:
        fastest = timing["fastest_peer"]
    assert figure["baseline_label"] == fastest
    assert timing["role"][fastest] == "peer"
    details = figure["details"]
    assert details["library"] == timing["library"][name]
    assert _positive(details["round_trips_per_call"])
    assert _positive(details["cpu_us_per_call"])
    if server == "postgres":
        assert _positive(details["write_transactions_per_call"])
        assert _positive(details["wal_fsyncs_per_call"])
        assert "WAL fsync" in figure["label"]
    else:
        assert _positive(details["write_commands_per_call"])
        fsyncs = details["fsyncs_per_call"]
        assert _positive(fsyncs) or (fsyncs is None and details["fsyncs_not_counted"])
    if target is not None:
        assert details["missed_by"] == pytest.approx(max(figure["ratio"] - target, 0), abs=1e-3)


def test_quick_peers_run_has_both_worker_counts_and_the_servers_counts(tmp_path: Path) -> None:
    """``run_all.py --quick --only peers``: every subject at 1 and 8 workers on both
    servers, a target on this library's rows only (a runner row against the fastest peer,
    a guard row against the fastest peer of its kind, the best guard row against the
    fastest peer), and
    beside each row the counts measured in the run (round trips; write transactions and
    WAL fsyncs on PostgreSQL; write commands and fsyncs on Redis), with the library's
    defaults (contracts off) although run_all's interpreter has them on."""
    pytest.importorskip("idemkit", reason="the bench extra (make bench installs it)")
    pytest.importorskip("aws_lambda_powertools", reason="the bench extra (make bench)")
    output = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run_all.py"),
            "--quick",
            "--only",
            "peers",
            "--json",
            str(output),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(output.read_text(encoding="utf-8"))
    figures = document["figures"]
    expected = {
        f"peers.{server}.{workers}.{subject}"
        for server, subjects in PEER_SUBJECTS.items()
        for workers in PEER_WORKERS
        for subject in subjects
    }
    assert set(figures) == expected
    peers = document["peers"]
    assert peers["contracts_enabled"] is False
    for key, figure in figures.items():
        _check_peer_figure(key, figure, peers, done.stdout)
    for server in PEER_SUBJECTS:
        for workers in PEER_WORKERS:
            # The best guard row is the guard row nearest the fastest peer of any kind.
            timing = peers[server]["workers"][workers.split("_")[0]]
            guards = [n for n, role in timing["role"].items() if role == "guard"]
            ratios = {n: timing["ratio_to_fastest_peer"][n] for n in guards}
            best = figures[f"peers.{server}.{workers}.best_guard"]
            assert best["ratio"] == min(ratios.values())
    library_rows = [f for f in figures.values() if f["target"] is not None]
    assert len(library_rows) == 20
    # The floor rows: the very writes run_once sends, the same count of each, and the
    # first two of them, one round trip fewer.
    for server, writes in (
        ("postgres", "write_transactions_per_call"),
        ("redis", "write_commands_per_call"),
    ):
        for workers in PEER_WORKERS:
            row = f"peers.{server}.{workers}"
            three = figures[f"{row}.the_same_three_writes.raw"]["details"]
            two = figures[f"{row}.the_first_two_writes.raw"]["details"]
            mine = figures[f"{row}.run_once.{server}store"]["details"]
            assert three["library"] == two["library"] == "no library"
            assert three[writes] == mine[writes]
            assert two[writes] < three[writes]
            assert two["round_trips_per_call"] < three["round_trips_per_call"]


def test_quick_redis_breakdown_splits_both_calls_and_counts_the_servers_commands(
    tmp_path: Path,
) -> None:
    """``benchmarks/redis_breakdown.py --quick``: every side's client CPU and wall time
    per call, and the server's commands per call exactly as the subjects send them:
    for run_once two EVALSHA, the delivered mark's CLIENT REPLY SKIP and EVAL, and the
    16 commands their scripts run (create: EXISTS, TIME, ZADD, HSET; each swap to another
    status: HMGET, TYPE, TIME, ZADD, ZREM, HSET); for the guard two EVALSHA and the 10
    of its two scripts; two SETs for powertools."""
    pytest.importorskip("aws_lambda_powertools", reason="the bench extra (make bench)")
    output = tmp_path / "breakdown.json"
    contracts_off = {"TOOL_CHECKPOINT_CONTRACTS": "0"}  # the defaults it measures
    done = _run_quick("redis_breakdown.py", output, contracts_off)
    document = json.loads(output.read_text(encoding="utf-8"))
    cpu = document["client_cpu_us_per_call"]
    assert (
        set(cpu)
        == set(document["wall_us_per_call"])
        == {
            "run_once, RedisStore",
            "powertools",
            "run_once, no I/O",
            "the store's 3 writes",
            "powertools' 2 SETs",
            "@checkpointed, RedisStore",
            "@checkpointed, no I/O",
            "the guard's 2 writes",
        }
    )
    assert all(_positive(value) for value in cpu.values())
    assert all(_positive(value) for value in document["wall_us_per_call"].values())
    servers = document["server_per_call"]
    assert servers["run_once, RedisStore"]["commands"] == 20
    assert servers["@checkpointed, RedisStore"]["commands"] == 12
    assert servers["powertools"]["commands"] == 2
    assert all(_positive(row["usec"]) for row in servers.values())
    assert document["contracts_enabled"] is False
    assert "run_once outside its writes" in done.stdout
    assert "the guard outside its writes" in done.stdout


def test_quick_redis_writes_takes_a_write_apart(tmp_path: Path) -> None:
    """``benchmarks/redis_writes.py --quick``: every variant timed with 1 and 8 workers,
    and the server's counts exactly as each variant's scripts make them: the store's
    12 commands a call (two EVALSHA; create: EXISTS, TIME, ZADD, HSET; swap to another
    status: HMGET, TYPE, TIME, ZADD, ZREM, HSET), 14 before #36, two SETs appended as
    they were sent, and fewer AOF bytes than before #36 (no updated_us)."""
    output = tmp_path / "writes.json"
    done = _run_quick("redis_writes.py", output)
    document = json.loads(output.read_text(encoding="utf-8"))
    variants = {
        "SET",
        "EVALSHA SET",
        "hash, no index",
        "one index, by time",
        "one index, by status",
        "per-status, no check",
        "the store's scripts",
        "the store's + updated_us",
        "before #36 (TYPE checks)",
    }
    assert set(document["workers"]) == {"1", "8"}
    for summary in document["workers"].values():
        for measure in ("wall", "client_cpu", "server_cpu", "command_us"):
            assert set(summary[measure]) == variants
            for cell in summary[measure].values():
                assert _positive(cell["us_per_call"])
                assert _positive(cell["ratio_to_set"])
    counts = document["server_per_call"]
    assert {name: row["commands"] for name, row in counts.items()} == {
        "SET": 2,
        "EVALSHA SET": 4,
        "hash, no index": 6,
        "one index, by time": 10,
        "one index, by status": 11,
        "per-status, no check": 11,
        "the store's scripts": 12,
        "the store's + updated_us": 12,
        "before #36 (TYPE checks)": 14,
    }
    assert counts["SET"]["replicated"] == counts["EVALSHA SET"]["replicated"] == {"SET": 2}
    mine = {"EXEC": 2, "HSET": 2, "MULTI": 2, "ZADD": 2, "ZREM": 1}
    assert counts["the store's scripts"]["replicated"] == mine
    assert (
        counts["the store's scripts"]["aof_bytes"] < counts["before #36 (TYPE checks)"]["aof_bytes"]
    )
    assert "per call (2 writes)" in done.stdout
