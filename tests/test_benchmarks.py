"""The benchmarks' pure-Python parts run end to end in quick mode and write their JSON.

No timing is asserted (the machine is shared): only that ``benchmarks/run_all.py --quick
--only core,validation`` finishes, prints its table and writes every expected figure
with positive numbers. The peers part runs quick too, on its own throwaway servers, when
the bench extra is installed (``make bench`` installs it); the stores part runs in
``make bench``.
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

ROOT = Path(__file__).resolve().parents[1]

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


# --- the peers (benchmarks/peers.py), in quick mode --------------------------------------

PEER_SUBJECTS = {
    "postgres": [
        "run_once.postgresstore",
        "run_once_async.asyncpostgresstore",
        "idemkit_sync",
        "idemkit_async",
        "the_same_three_writes.raw",
        "the_first_two_writes.raw",
    ],
    "redis": [
        "run_once.redisstore",
        "run_once_async.asyncredisstore",
        "idemkit_sync",
        "idemkit_async",
        "powertools",
        "the_same_three_writes.raw",
        "the_first_two_writes.raw",
    ],
}
PEER_WORKERS = {"1_worker": "µs", "8_workers": "calls/s"}


def test_quick_peers_run_has_both_worker_counts_and_the_servers_counts(tmp_path: Path) -> None:
    """``run_all.py --quick --only peers``: every subject at 1 and 8 workers on both
    servers, a target on this library's rows only, the fastest peer as the baseline, and
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
        server, workers = key.split(".")[1:3]
        mine = figure["details"]["library"] == "this library"
        assert figure["unit"] == PEER_WORKERS[workers]
        assert figure["label"] in done.stdout
        for field in ("value", "baseline", "ratio"):
            assert _positive(figure[field]), (key, field, figure[field])
        assert figure["target"] == (1.0 if mine else None)
        assert figure["passed"] is (None if not mine else figure["ratio"] <= 1.0)
        timing = peers[server]["workers"][workers.split("_")[0]]
        assert figure["baseline_label"] == timing["fastest_peer"]
        assert timing["library"][timing["fastest_peer"]] not in ("this library", "no library")
        details = figure["details"]
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
        if mine:
            assert details["missed_by"] == pytest.approx(max(figure["ratio"] - 1.0, 0), abs=1e-3)
    library_rows = [f for f in figures.values() if f["target"] is not None]
    assert len(library_rows) == 8
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
    """``benchmarks/redis_breakdown.py --quick``: every side's client CPU per call, and
    the server's commands per call exactly as the two subjects send them: three EVALSHA
    and the 16 commands their scripts run (create: EXISTS, TYPE, HSET, ZADD; each swap:
    HMGET, TYPE, TYPE, HSET, ZREM, ZADD) for run_once, two SETs for powertools."""
    pytest.importorskip("aws_lambda_powertools", reason="the bench extra (make bench)")
    output = tmp_path / "breakdown.json"
    script = str(ROOT / "benchmarks" / "redis_breakdown.py")
    done = subprocess.run(
        [sys.executable, script, "--quick", "--json", str(output)],
        env={**os.environ, "TOOL_CHECKPOINT_CONTRACTS": "0"},  # the defaults it measures
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(output.read_text(encoding="utf-8"))
    cpu = document["client_cpu_us_per_call"]
    assert set(cpu) == {
        "run_once, RedisStore",
        "powertools",
        "run_once, no I/O",
        "the store's 3 writes",
        "powertools' 2 SETs",
    }
    assert all(_positive(value) for value in cpu.values())
    servers = document["server_per_call"]
    assert servers["run_once, RedisStore"]["commands"] == 19
    assert servers["powertools"]["commands"] == 2
    assert all(_positive(row["usec"]) for row in servers.values())
    assert document["contracts_enabled"] is False
    assert "library outside the writes" in done.stdout
