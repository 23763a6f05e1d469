"""The benchmarks' pure-Python parts run end to end in quick mode and write their JSON.

No timing is asserted (the machine is shared): only that ``benchmarks/run_all.py --quick
--only core,validation`` finishes, prints its table and writes every expected figure
with positive numbers. The parts with servers and peers run in ``make bench``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

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
