"""A guarded call through run_once on SQLiteStore, against the same statements sent raw.

The subject is one ``run_once(store, binding, tool, deliver)`` on a key of its own (a
tool returning 1 KiB, a no-op delivery): everything the library does for one call, the
runner, the core's records and checks (with the contracts on, and in a second run off)
and the store. The baseline sends exactly the statements the store sent for one such
call, nothing else, through plain sqlite3: no library code runs on its side.

The baseline follows the store instead of copying its SQL: before timing, each call of
the baseline is first run through ``run_once`` on a store of its own (a third file)
whose connection is traced with ``sqlite3.Connection.set_trace_callback``. SQLite hands
the trace every statement with its parameters written in as literals; the benchmark
turns each literal back into a bound parameter, so the baseline sends the same statement
texts (and so reuses sqlite3's prepared statements as the store does) with the same
values, through one cursor (the cheapest way plain sqlite3 has): the same
``BEGIN IMMEDIATE``, the same INSERT or UPDATE, the same ``COMMIT``, in the same order.
Its connection is opened as the store opens its own (autocommit mode, no busy handler)
and given the pragmas traced while the store opened its file (WAL, ``synchronous=FULL``,
``fullfsync``); the benchmark checks that both connections then report the same
settings, and after the run that the baseline's file holds exactly the rows the traced
store wrote.

A second figure isolates the store: the same store operations ``run_once`` made
(recorded while tracing, records made before timing) sent through ``SQLiteStore``'s
methods, against the same raw statements. It is the store's own cost per write: its
argument checks, encoding a record into its columns, the lock and the error mapping.

Each round runs a batch of calls on each side, one side after the other in an order
that rotates each round, so a slow moment of the shared disk hits every side of its
round; the ratio is the median of the per-round ratios (subject time over baseline
time; ``_measure.compare``), the target is 1.15x for ``run_once``. The contracts are
read at import, so each setting runs in an interpreter of its own
(``TOOL_CHECKPOINT_CONTRACTS=1`` and ``=0``). The same workers then time ``run_once``
with 8 threads sharing the store, on distinct keys and on one hot key (all 8 start the
same call at once: one runs the tool, the others read the record and answer), in
rounds paired with the 1-thread rate; those figures have no target.

    python benchmarks/store_sqlite.py [--quick] [--calls N] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _measure import (
    Figure,
    compare,
    paired_rounds,
    print_table,
    run_with_contracts,
    threaded,
    write_json,
)

from tool_execution_checkpoint import (
    Binding,
    Checkpoint,
    RunOutcome,
    RunStatus,
    SQLiteStore,
    run_once,
)
from tool_execution_checkpoint.transitions import CONTRACTS_ENABLED

PAYLOAD = {"data": "x" * (1024 - len('{"data":""}'))}  # 1,024 bytes of compact JSON
TARGET = 1.15
WORKERS = 8

Statement = tuple[str, tuple[object, ...]]
"""A statement text with ``?`` placeholders and the values bound to them."""
Operation = tuple[str, tuple[Any, ...]]
"""A store method's name and its arguments."""

# --- the statements the store sends, from its connection's trace --------------------------

# The tokens of an SQL text that matter here, in the order they are tried: comments and
# quoted identifiers are kept as they are, words (keywords, names, NULL) too; blob, text
# and number literals become parameters. A minus sign stays in the text (-? binds the
# number), so "revision-1" and "-1" both keep their meaning.
_TOKEN = re.compile(
    r"""
      (?P<keep>--[^\n]*|/\*.*?\*/|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\])
    | (?P<blob>[xX]'(?:[0-9A-Fa-f]{2})*')
    | (?P<text>'(?:[^']|'')*')
    | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    | (?P<hex>0[xX][0-9A-Fa-f]+)
    | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    """,
    re.VERBOSE | re.DOTALL,
)


def parameterize(expanded: str) -> Statement:
    """The statement text and parameters of ``expanded``, an SQL text as SQLite's trace
    gives it (every bound parameter written in as a literal): each literal becomes a
    ``?`` and its value a parameter, in order."""
    parts: list[str] = []
    values: list[object] = []
    position = 0
    for token in _TOKEN.finditer(expanded):
        kind, literal = token.lastgroup, token.group()
        if kind in ("keep", "word"):
            continue
        parts.append(expanded[position : token.start()])
        parts.append("?")
        position = token.end()
        if kind == "blob":
            values.append(bytes.fromhex(literal[2:-1]))
        elif kind == "text":
            values.append(literal[1:-1].replace("''", "'"))
        elif kind == "hex":
            values.append(int(literal, 16))
        elif re.fullmatch(r"\d+", literal):
            values.append(int(literal))
        else:
            values.append(float(literal))
    parts.append(expanded[position:])
    return "".join(parts), tuple(values)


# The settings of a connection that change what a statement costs or how durable its
# commit is; the baseline's connection must report the store's.
SETTINGS = (
    "journal_mode",
    "synchronous",
    "fullfsync",
    "checkpoint_fullfsync",
    "busy_timeout",
    "locking_mode",
    "wal_autocheckpoint",
    "journal_size_limit",
    "cache_size",
    "cache_spill",
    "mmap_size",
    "page_size",
    "temp_store",
    "secure_delete",
    "foreign_keys",
    "recursive_triggers",
    "automatic_index",
)


def settings(db: sqlite3.Connection) -> dict[str, object]:
    """The connection's value of each of :data:`SETTINGS`."""
    return {name: db.execute(f"PRAGMA {name}").fetchone()[0] for name in SETTINGS}


def rows(path: Path) -> list[tuple[object, ...]]:
    """Every row of the file's checkpoint table, in key order."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT * FROM tec_checkpoint ORDER BY key").fetchall()


def traced_connection(store: SQLiteStore) -> sqlite3.Connection:
    """The store's own connection (the benchmark traces and compares it)."""
    db = store._db
    if db is None:
        raise RuntimeError("the store is closed")
    return db


class TracedStore(SQLiteStore):
    """An SQLiteStore whose connection is traced from the moment it is opened: ``traced``
    is every statement it ran, as SQLite's trace gives it (parameters written in)."""

    def __init__(self, path: Path) -> None:
        self.traced: list[str] = []
        super().__init__(path)

    def _configure(self, db: sqlite3.Connection) -> None:
        db.set_trace_callback(self.traced.append)
        super()._configure(db)


class Recording:
    """A store that records the operations ``run_once`` makes and passes them on."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.operations: list[Operation] = []

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        self.operations.append(("create_if_absent", (key, record)))
        return self.store.create_if_absent(key, record)

    def get(self, key: str) -> Mapping[str, Any] | None:
        self.operations.append(("get", (key,)))
        return self.store.get(key)

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        self.operations.append(("compare_and_swap", (key, expected_revision, record)))
        return self.store.compare_and_swap(key, expected_revision, record)


def tool() -> Any:
    return PAYLOAD


def deliver(payload: object) -> None:
    del payload


def guarded(store: Any, binding: Binding) -> RunOutcome:
    """One guarded call; it must run the tool and deliver."""
    outcome = run_once(store, binding, tool, deliver)
    if outcome.status is not RunStatus.EXECUTED_AND_DELIVERED:
        raise AssertionError(f"a call on a key of its own ended {outcome.status}")
    return outcome


@dataclass(frozen=True)
class Call:
    """One guarded call: its binding, the statements the store sent for it and the store
    operations run_once made, both in order."""

    binding: Binding
    statements: list[Statement]
    operations: list[Operation]


@dataclass
class Traced:
    """Calls traced through a store on a file of their own, and its opening pragmas."""

    path: Path
    pragmas: list[str]
    calls: list[Call] = field(default_factory=list)


def trace(path: Path, count: int) -> Traced:
    """Run ``count`` guarded calls through a traced store on ``path``; return what each
    sent, and the pragmas the store set when it opened the file."""
    store = TracedStore(path)
    recording = Recording(store)
    pragmas = [text for text in store.traced if text.lstrip().upper().startswith("PRAGMA")]
    traced = Traced(path, pragmas)
    try:
        for number in range(count):
            binding = Binding("bench", f"call-{number}", "tool", "1", "sha256:0")
            del store.traced[:], recording.operations[:]
            guarded(recording, binding)
            statements = [parameterize(text) for text in store.traced]
            traced.calls.append(Call(binding, statements, list(recording.operations)))
    finally:
        store.close()
    texts = {text for call in traced.calls for text, _ in call.statements}
    if len(texts) > 8:  # one per kind of statement, whatever the values
        raise AssertionError(f"the traced statements do not reduce to a few texts: {texts}")
    return traced


class Raw:
    """The baseline: plain sqlite3, opened as the store opens its connection, with the
    pragmas the store set, sending the traced statements as they are."""

    def __init__(self, path: Path, traced: Traced, store: SQLiteStore) -> None:
        SQLiteStore(path).close()  # the same schema, made by the store
        self.db = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
        for pragma in traced.pragmas:
            self.db.execute(pragma).fetchall()
        mine, theirs = settings(self.db), settings(traced_connection(store))
        if mine != theirs:
            raise AssertionError(f"the connections differ: raw {mine}, store {theirs}")
        # One cursor for every statement: Connection.execute makes a new cursor each time,
        # which costs more than a small statement itself.
        self.cursor = self.db.cursor()

    def send(self, call: Call) -> None:
        execute = self.cursor.execute
        for text, values in call.statements:
            execute(text, values)

    def close(self) -> None:
        self.db.close()


def store_writes(store: SQLiteStore, call: Call) -> None:
    """The store operations run_once made for ``call``, sent through ``store``."""
    for name, arguments in call.operations:
        getattr(store, name)(*arguments)


# --- the measured batches ---------------------------------------------------------------------


def batch(
    side: Callable[[Call], object], calls: Iterator[Call], count: int, cpu: list[float]
) -> float:
    """``count`` calls of ``side`` in a row; seconds per call (its CPU time per call is
    appended to ``cpu``)."""
    work = list(itertools.islice(calls, count))
    if len(work) != count:
        raise RuntimeError("ran out of traced calls")
    wall, processor = time.perf_counter(), time.process_time()
    for call in work:
        side(call)
    cpu.append((time.process_time() - processor) / count)
    return (time.perf_counter() - wall) / count


def versus_raw(directory: Path, calls: int, rounds: int) -> dict[str, Any]:
    """run_once and the store's writes alone, each against the traced statements sent
    raw, in paired rounds of ``calls`` calls a side."""
    warm = max(4, calls // 4)
    traced = trace(directory / "traced.db", warm + calls * rounds)
    runner, writes = SQLiteStore(directory / "runner.db"), SQLiteStore(directory / "writes.db")
    raw = Raw(directory / "raw.db", traced, runner)
    sides: dict[str, Callable[[Call], object]] = {
        "raw": raw.send,
        "run_once": lambda call: guarded(runner, call.binding),
        "writes": functools.partial(store_writes, writes),
    }
    try:
        pending = {name: iter(traced.calls) for name in sides}
        cpu: dict[str, list[float]] = {name: [] for name in sides}
        for name, side in sides.items():  # prepared statements, caches, the files' pages
            batch(side, pending[name], warm, [])
        samples = paired_rounds(
            {
                name: functools.partial(batch, side, pending[name], calls, cpu[name])
                for name, side in sides.items()
            },
            rounds,
        )
    finally:
        raw.close()
        runner.close()
        writes.close()
    expected = rows(traced.path)
    for name in ("raw", "writes"):
        if rows(directory / f"{name}.db") != expected:
            raise AssertionError(f"the {name} side did not write what the traced store wrote")
    paired = compare(samples, "raw")
    statements = traced.calls[0].statements
    results: dict[str, Any] = {
        "calls_per_batch": calls,
        "rounds": rounds,
        "statements_per_call": len(statements),
        "statements": [text for text, _ in statements],
        "store_operations_per_call": [name for name, _ in traced.calls[0].operations],
        "contracts_enabled": CONTRACTS_ENABLED,
        "sqlite_version": sqlite3.sqlite_version,
    }
    for name in sides:
        results[name] = {
            "us_per_call": round(paired.us(name), 1),
            "cpu_us_per_call": round(statistics.median(cpu[name]) * 1e6, 1),
            "ratio": round(paired.ratios[name], 3),
        }
    return results


_batches = itertools.count()


def threads_batch(store: SQLiteStore, threads: int, hot: bool, calls: int) -> float:
    """Seconds per key served: ``calls`` keys through run_once, with ``threads``
    threads on distinct keys, or all of them on each key at once when ``hot``."""
    run = next(_batches)
    ran: list[int] = []

    def counted() -> Any:
        ran.append(1)  # list.append is atomic
        return PAYLOAD

    def binding(number: int) -> Binding:
        return Binding("bench", f"threads-{run}-{number}", "tool", "1", "sha256:0")

    if threads == 1:
        started = time.perf_counter()
        for number in range(calls):
            run_once(store, binding(number), counted, deliver)
        elapsed = time.perf_counter() - started
    elif hot:
        barrier = threading.Barrier(threads)

        def contend() -> None:
            for number in range(calls):
                barrier.wait()  # every thread starts this call together
                run_once(store, binding(number), counted, deliver)

        elapsed = threaded([contend] * threads)
    else:
        share = calls // threads

        def own(worker: int) -> None:
            for number in range(share):
                run_once(store, binding(worker * share + number), counted, deliver)

        calls = share * threads
        elapsed = threaded([functools.partial(own, worker) for worker in range(threads)])
    if len(ran) != calls:
        raise AssertionError(f"{len(ran)} tools ran for {calls} keys")
    return elapsed / calls


def with_threads(directory: Path, calls: int, rounds: int) -> dict[str, Any]:
    """run_once with 8 threads on distinct keys and on a hot key, in paired rounds with
    one thread, all through one store."""
    store = SQLiteStore(directory / "threads.db")
    sides = {
        "1 thread": (1, False),
        f"{WORKERS} threads": (WORKERS, False),
        f"{WORKERS} threads, hot key": (WORKERS, True),
    }
    try:
        for threads, hot in sides.values():
            threads_batch(store, threads, hot, max(WORKERS, calls // 4))
        samples = paired_rounds(
            {
                name: functools.partial(threads_batch, store, threads, hot, calls)
                for name, (threads, hot) in sides.items()
            },
            rounds,
        )
    finally:
        store.close()
    paired = compare(samples, "1 thread")
    return {
        name: {
            "calls_per_second": round(paired.per_second(name), 1),
            "ratio": round(paired.ratios[name], 3),
            "calls_per_batch": calls,
            "rounds": rounds,
        }
        for name in sides
    }


def measure(calls: int, rounds: int) -> tuple[list[Figure], dict[str, Any]]:
    """Every figure of this interpreter's contracts setting."""
    with tempfile.TemporaryDirectory(prefix="tec-bench-sqlite-") as name:
        paired = versus_raw(Path(name), calls, rounds)
        threads = with_threads(Path(name), calls, rounds)
    setting = "on" if CONTRACTS_ENABLED else "off"
    suffix = "" if CONTRACTS_ENABLED else ".contracts_off"
    raw = paired["raw"]
    note = f"{paired['statements_per_call']} statements per call, 1 KiB result"
    figures = [
        Figure(
            key=f"sqlite.run_once{suffix}",
            label=f"run_once on SQLiteStore vs the same statements raw, contracts {setting}",
            value=paired["run_once"]["us_per_call"],
            unit="µs/call",
            baseline=raw["us_per_call"],
            baseline_label="raw statements",
            ratio=paired["run_once"]["ratio"],
            target=TARGET,
            note=note,
            details=paired,
        ),
        Figure(
            key=f"sqlite.store_writes{suffix}",
            label=f"SQLiteStore's writes alone vs the same statements raw, contracts {setting}",
            value=paired["writes"]["us_per_call"],
            unit="µs/call",
            baseline=raw["us_per_call"],
            baseline_label="raw statements",
            ratio=paired["writes"]["ratio"],
            note=f"records made before timing; {note}",
        ),
    ]
    single = threads["1 thread"]
    for name, result in threads.items():
        if name == "1 thread":
            continue
        figures.append(
            Figure(
                key=f"sqlite.{name.replace(', ', '_').replace(' ', '_')}{suffix}",
                label=f"run_once on SQLiteStore, {name}, contracts {setting}",
                value=result["calls_per_second"],
                unit="calls/s",
                baseline=single["calls_per_second"],
                baseline_label="1 thread",
                ratio=result["ratio"],
                details=result,
            )
        )
    return figures, {"versus_raw": paired, "threads": threads}


def run(
    quick: bool = False, calls: int | None = None, rounds: int | None = None
) -> tuple[list[Figure], dict[str, Any]]:
    """The figures with the contracts on, then off, each in an interpreter of its own."""
    calls = calls or (8 if quick else 48)
    rounds = rounds or (3 if quick else 15)
    figures: list[Figure] = []
    details: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tec-bench-sqlite-runs-") as name:
        for contracts in (True, False):
            output = Path(name) / f"contracts-{contracts}.json"
            command = [str(Path(__file__).resolve()), "--worker", "--json", str(output)]
            command += ["--calls", str(calls), "--rounds", str(rounds)]
            run_with_contracts(contracts, command, timeout=1200)
            document = json.loads(output.read_text(encoding="utf-8"))
            part = document["sqlite"]
            if part["versus_raw"]["contracts_enabled"] is not contracts:
                raise RuntimeError(f"the run meant to have contracts {contracts} did not")
            details["contracts_on" if contracts else "contracts_off"] = part
            for data in document["figures"].values():
                figures.append(Figure(**{k: v for k, v in data.items() if k != "passed"}))
    return figures, details


def main(arguments: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small batches, 3 rounds")
    parser.add_argument("--calls", type=int, help="calls per batch (default 48)")
    parser.add_argument("--rounds", type=int, help="paired rounds (default 15)")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(arguments)
    if args.worker:  # one contracts setting, in this interpreter
        figures, details = measure(args.calls, args.rounds)
    else:
        figures, details = run(args.quick, args.calls, args.rounds)
    print_table(figures)
    if not args.worker:
        for setting, part in details.items():
            print(f"\n{setting.replace('_', ' ')}: per call, median over the rounds")
            for side in ("raw", "run_once", "writes"):
                line = part["versus_raw"][side]
                print(
                    f"  {side:<9} {line['us_per_call']:>8.1f} µs wall"
                    f" {line['cpu_us_per_call']:>8.1f} µs CPU  {line['ratio']:.3f}x raw"
                )
        statements = details["contracts_on"]["versus_raw"]["statements"]
        print("\nthe statements of one call:", *(f"  {text}" for text in statements), sep="\n")
    if args.json:
        write_json(args.json, figures, {"sqlite": details})
    sys.stdout.flush()


if __name__ == "__main__":
    main()
