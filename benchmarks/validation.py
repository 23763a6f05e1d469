"""Validating a result payload, against one ``json.dumps`` of it, and its peak memory.

The payloads are realistic nested JSON, made here from a fixed seed: a search-like result
with a list of documents, each an object of strings (with accented Latin, Greek and CJK
text), numbers, booleans, a list of tags and a nested author object. Their compact UTF-8
JSON is exactly 64 KiB (65,536 bytes) and exactly 10 MiB (10,485,760 bytes, the ceiling
of ``max_payload_bytes``), within the value-count and depth limits.

The library's path is the public ``Result(payload, completed_at=..., max_payload_bytes=...)``
(what ``complete_execution`` builds for its result): it walks the value, checks every type
and limit, encodes it compactly and measures the UTF-8 size. The baseline is one
``json.dumps(payload, ensure_ascii=False, separators=(",", ":"))``, the encoding a store
needs anyway. Target: at most 1.5x.

Peak memory of validating the 10 MiB payload is measured in a fresh subprocess per
measurement, after the payload is built: the process's peak resident set size (Linux
``VmHWM``, reset to the current RSS just before the call) after the call minus the RSS
before it, and, in another subprocess, ``tracemalloc``'s peak of Python allocations
during the call. (``ru_maxrss`` is the same high-water mark, but Linux carries it over
``execve`` from the spawning process, so a fresh subprocess inherits its parent's peak.)
Both are reported as a multiple of the payload's size, for the library and for
``json.dumps`` alone; the library keeps the compact text it made, as a store needs it.

    python benchmarks/validation.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import random
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _measure import Figure, calibrate, compare, paired_rounds, per_call, print_table, write_json

from tool_execution_checkpoint.records import Result

NOW = "2026-01-01T00:00:00Z"
SMALL = 65_536
LARGE = 10_485_760
TARGET = 1.5

_TEXT = (
    "the quick brown fox jumps over lazy dog agent tool result delivered stored once "
    "checkpoint revision claim payload server request response latency index search "
    "café naïve façade résumé Zürich Ελληνικά λόγος 東京 データ 検索 结果 数据 ✓ — «quoted»"
)
_WORDS = _TEXT.split()


def _corpus(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(60_000))


def _encoded_size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def make_payload(size: int, seed: int = 7) -> dict[str, Any]:
    """A nested JSON object whose compact UTF-8 encoding is exactly ``size`` bytes, built
    item by item (no large temporary) so the process's high-water mark is the payload."""
    rng = random.Random(seed)
    corpus = _corpus(rng)
    items = max(4, min(650, size // 2_000))
    body_chars = max(64, size // items - 400)
    documents: list[dict[str, Any]] = []
    payload: dict[str, Any] = {
        "query": "checkpoint café 東京",
        "total": 0,
        "took_ms": 12.5,
        "documents": documents,
        "note": "",
    }
    used = _encoded_size(payload)
    for number in range(items):
        start = rng.randrange(0, len(corpus) - body_chars)
        document = {
            "id": number,
            "title": " ".join(rng.choice(_WORDS) for _ in range(6)),
            "url": f"https://example.com/docs/{number}",
            "score": round(rng.random(), 6),
            "published": rng.random() < 0.5,
            "tags": [rng.choice(_WORDS) for _ in range(3)],
            "author": {"name": rng.choice(_WORDS).title(), "karma": rng.randrange(10**6)},
            "body": corpus[start : start + body_chars],
        }
        extra = _encoded_size(document) + (1 if documents else 0)
        if used + extra > size - 16:
            break
        documents.append(document)
        used += extra
    # The size of the whole, without encoding it whole: the skeleton plus each document.
    payload["total"] = len(documents)
    payload["documents"] = []
    used += _encoded_size(payload) - _encoded_size({**payload, "total": 0})
    payload["documents"] = documents
    payload["note"] = "x" * (size - used)
    return payload


def library(payload: object, limit: int) -> Any:
    return Result(payload, completed_at=NOW, max_payload_bytes=limit)


def dumps(payload: object, limit: int) -> Any:
    del limit
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


SIDES: dict[str, Callable[[object, int], Any]] = {"json.dumps": dumps, "library": library}


def speed(size: int, rounds: int, seconds: float) -> dict[str, Any]:
    """Paired rounds of the library's validation against json.dumps on one payload."""
    payload = make_payload(size)
    if _encoded_size(payload) != size:
        raise AssertionError("payload size is off")
    calls = {name: functools.partial(side, payload, size) for name, side in SIDES.items()}
    counts = {name: calibrate(call, seconds) for name, call in calls.items()}
    samples = paired_rounds(
        {name: functools.partial(per_call, call, counts[name]) for name, call in calls.items()},
        rounds,
    )
    paired = compare(samples, "json.dumps")
    return {
        "payload_bytes": size,
        "rounds": rounds,
        "calls_per_round": counts,
        "library_us": round(paired.us("library"), 1),
        "json_dumps_us": round(paired.us("json.dumps"), 1),
        "ratio": round(paired.ratios["library"], 3),
    }


def _status_kib(field: str) -> int | None:
    """A field of /proc/self/status in KiB (VmRSS: resident now; VmHWM: its peak)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux 4.0+); False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def memory_worker(side: str, method: str, size: int) -> dict[str, Any]:
    """In a fresh process: build the payload, then measure one call of ``side``."""
    payload = make_payload(size)
    run = SIDES[side]
    run({"warm": "up"}, size)  # imports done before measuring
    gc.collect()
    if method == "tracemalloc":
        tracemalloc.start()
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        kept = run(payload, size)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del kept
        return {"peak_bytes": peak - before}
    # The peak RSS. Not ru_maxrss: Linux carries it over execve from the process that
    # spawned this one (whose own peak may be higher), so it cannot be read as "before".
    # VmHWM is the same high-water mark for this process image alone, and resettable.
    if not _reset_peak():
        raise RuntimeError("cannot reset the peak RSS here (needs Linux /proc/self/clear_refs)")
    rss_before, hwm_before = _status_kib("VmRSS"), _status_kib("VmHWM")
    kept = run(payload, size)
    hwm_after = _status_kib("VmHWM")
    del kept
    if rss_before is None or hwm_before is None or hwm_after is None:
        raise RuntimeError("no VmRSS or VmHWM in /proc/self/status")
    return {
        "peak_bytes": (hwm_after - rss_before) * 1024,
        "rss_before_kib": rss_before,
        "hwm_before_kib": hwm_before,
        "hwm_after_kib": hwm_after,
    }


def memory(size: int) -> dict[str, Any]:
    """Peak memory of each side, each method, each in a fresh subprocess."""
    results: dict[str, Any] = {"payload_bytes": size}
    for method in ("peak_rss", "tracemalloc"):
        for side in SIDES:
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--memory-worker",
                side,
                method,
                str(size),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
            measured = json.loads(done.stdout)
            measured["multiple_of_payload"] = round(measured["peak_bytes"] / size, 2)
            results[f"{side}.{method}"] = measured
    return results


def run(quick: bool = False) -> tuple[list[Figure], dict[str, Any]]:
    """Validation speed at 64 KiB and 10 MiB, and peak memory at 10 MiB."""
    rounds = 3 if quick else 11
    small = speed(SMALL, rounds, 0.01 if quick else 0.05)
    large = speed(LARGE, rounds, 0.0)  # one call per side per round
    peak = memory(LARGE)
    figures = [
        Figure(
            key=f"validation.{name}",
            label=f"validate a {label} payload",
            value=result["library_us"],
            unit="µs",
            baseline=result["json_dumps_us"],
            baseline_label="one json.dumps",
            ratio=result["ratio"],
            target=TARGET,
            note="Result(payload, completed_at=..., max_payload_bytes=...)",
            details=result,
        )
        for name, label, result in (("64kib", "64 KiB", small), ("10mib", "10 MiB", large))
    ]
    for method in ("peak_rss", "tracemalloc"):
        mine = peak[f"library.{method}"]["multiple_of_payload"]
        base = peak[f"json.dumps.{method}"]["multiple_of_payload"]
        figures.append(
            Figure(
                key=f"validation.10mib.peak_{method}",
                label=f"peak memory validating 10 MiB ({method})",
                value=mine,
                unit="x payload",
                baseline=base,
                baseline_label="json.dumps",
                ratio=round(mine / base, 3) if base > 0 else None,
                note="fresh subprocess; peak during the call minus before it, / payload bytes",
                details={
                    "library": peak[f"library.{method}"],
                    "json.dumps": peak[f"json.dumps.{method}"],
                },
            )
        )
    return figures, {"64kib": small, "10mib": large, "memory_10mib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few rounds")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--memory-worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_worker:
        side, method, size = args.memory_worker
        print(json.dumps(memory_worker(side, method, int(size))))
        return
    figures, details = run(args.quick)
    print_table(figures)
    if args.json:
        write_json(args.json, figures, {"validation": details})


if __name__ == "__main__":
    main()
