"""Every benchmark in one command: one table, and the results as JSON.

Each figure is a ratio to a baseline measured in the same run, in paired rounds, as a
median (see _measure.py). The parts:

- core: one lifecycle through the pure core vs plain dicts, contracts on and off
  (core_lifecycle.py);
- validation: a 64 KiB and a 10 MiB payload through ``Result`` vs one json.dumps, and
  the peak memory of the 10 MiB one (validation.py);
- stores: run_once on MemoryStore, SQLiteStore, PostgresStore and RedisStore vs the raw
  statements, 1 and 8 workers, distinct keys and a hot key, and with 1 worker the
  store's writes alone (run_once's writes replayed through the store) vs the same raw
  statements (stores.py);
- peers: the same guarded call through idemkit and aws-lambda-powertools on the same
  PostgreSQL and Redis servers, with round trips per call (peers.py);
- harness: the model-based harness's examples/s on MemoryStore and SQLiteStore
  (harness_speed.py).

``--quick`` runs small counts (a smoke test, not figures to quote); ``--only`` picks
parts. The servers are started by the parts that need them (PostgreSQL and Redis from
Debian's packages: scripts/install-services.sh).

    python benchmarks/run_all.py [--quick] [--only core,validation,...] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from _measure import Figure, markdown_table, print_table, write_json

# The core's contracts are off by default and read at import. The parts' "contracts on"
# rows run in this interpreter, so it turns them on; each "contracts off" row runs in a
# fresh interpreter with them off, as a production host runs by default.
os.environ.setdefault("TOOL_CHECKPOINT_CONTRACTS", "1")

Part = Callable[[bool], tuple[list[Figure], dict[str, Any]]]

DEFAULT_JSON = Path(__file__).resolve().parent / "results.json"


MODULES = {
    "core": "core_lifecycle",
    "validation": "validation",
    "stores": "stores",
    "peers": "peers",
    "harness": "harness_speed",
}


def load(name: str) -> Part:
    """The part's ``run(quick)``, imported only when it runs (peers needs the bench
    extra, stores and peers need the servers)."""
    if name not in MODULES:
        raise SystemExit(f"unknown part {name!r}: choose from {', '.join(MODULES)}")
    return cast(Part, importlib.import_module(MODULES[name]).run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke test")
    parser.add_argument("--only", default=",".join(MODULES), help="comma-separated parts")
    parser.add_argument("--json", default=str(DEFAULT_JSON), help="where to write results")
    parser.add_argument("--markdown", help="also write the table as Markdown here")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    runs = [(name, load(name)) for name in chosen]
    figures: list[Figure] = []
    details: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    for name, run in runs:
        began = time.perf_counter()
        part_figures, details[name] = run(args.quick)
        seconds[name] = round(time.perf_counter() - began, 1)
        figures += part_figures
        print(f"[{name}: {seconds[name]:.1f} s]", flush=True)
    total = round(time.perf_counter() - started, 1)
    print()
    print_table(figures)
    met = [figure.passed for figure in figures if figure.passed is not None]
    print(f"\ntargets met: {sum(met)} of {len(met)}; {total:.0f} s in all")
    write_json(
        args.json,
        figures,
        {"quick": args.quick, "parts": chosen, "seconds": {**seconds, "total": total}, **details},
    )
    if args.markdown:
        Path(args.markdown).write_text(markdown_table(figures), encoding="utf-8")


if __name__ == "__main__":
    main()
