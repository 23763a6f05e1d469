"""The reliability table of docs/testing.md quotes what one ``make test`` run does to each store:
how many worker processes race, how many rounds and seconds they run, how many SIGKILLs
the tests require, how many garbage rows are written and read back. This file runs
nothing heavy: it reads those figures where the tests keep them (the kill storm's
defaults, the ``kill_storm(...)`` calls and their ``assert ... >= N`` in each store's
tests, the suites with a ``write_raw`` hook) and counts the garbage rows of one suite
on a MemoryStore, then compares every number of the table, between the markers below,
with them. A changed default or test fails here until the page says the same; the
message shows the table the tests would have it say.

``TOOL_CHECKPOINT_RELIABILITY_README`` names another file to read than docs/testing.md."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from functools import cache
from inspect import Parameter, signature
from pathlib import Path
from typing import Any

import test_memory_store as memory_suite
from tool_execution_checkpoint.stores.memory import MemoryStore
from tool_execution_checkpoint.testing.conformance import GARBAGE_EXAMPLES
from tool_execution_checkpoint.testing.processes import ROUNDS, kill_storm

ROOT = Path(__file__).resolve().parents[1]
README = Path(os.environ.get("TOOL_CHECKPOINT_RELIABILITY_README", ROOT / "docs" / "testing.md"))
BEGIN = "<!-- reliability: checked by tests/test_reliability_figures.py -->"
END = "<!-- /reliability -->"

PROCESSES = "src/tool_execution_checkpoint/testing/processes.py"
CHECK_STORE = "src/tool_execution_checkpoint/testing/check_store.py"
STORM_TESTS = "tests/test_processes.py"
CLI_TESTS = "tests/test_cli.py"
SQLITE_TESTS = "tests/test_sqlite_store.py"
POSTGRES_TESTS = "tests/test_postgres_store.py"
REDIS_TESTS = "tests/test_redis_store.py"
CLUSTER_TESTS = "tests/test_redis_cluster.py"

STORE_OF_SUITE_FILE = {
    "tests/test_memory_store.py": "`MemoryStore`",
    "tests/test_store.py": "`MemoryStore`",  # AsyncMemoryStore, MemoryStore under the adapter
    SQLITE_TESTS: "`SQLiteStore`",
    POSTGRES_TESTS: "`PostgresStore`",
    REDIS_TESTS: "`RedisStore`",
    CLUSTER_TESTS: "Redis Cluster",
}
"""The files whose conformance suites with a ``write_raw`` hook vet a store of the
package, and the table's name of that store."""

OWN_TEST_STORES = frozenset({"tests/test_conformance_catches_bugs.py"})
"""Files whose ``write_raw`` suites vet stores written for the tests, not the package's."""

STORMS_ELSEWHERE = frozenset(
    {
        # Broken stores of tests/storm_stores.py, caught by the storm, or a test store.
        "test_the_default_storm_catches_a_store_atomic_only_within_one_process",
        "test_the_default_storm_catches_a_store_that_tears_a_write",
        "test_free_running_calls_at_random_catch_a_torn_write_too",
        "test_the_store_argument_never_shows_on_a_command_line",
        "test_check_store_s_storm_fails_a_store_atomic_only_within_one_process",
    }
)
"""Tests that run a kill storm on no store of the package: not in the table."""

STORM_DEFAULTS: dict[str, Any] = {
    name: parameter.default
    for name, parameter in signature(kill_storm).parameters.items()
    if parameter.default is not Parameter.empty
}
KNOWN: dict[str, Any] = {"ROUNDS": ROUNDS}
"""Names the tests' thresholds may use (``>= ROUNDS // 2``)."""

NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
PATH = re.compile(r"`((?:tests|src)/[\w/]+\.py)`")


# --- reading the tests' source -------------------------------------------------------------


@cache
def _module(relative: str) -> ast.Module:
    return ast.parse((ROOT / relative).read_text(encoding="utf-8"))


def _missing(what: str) -> AssertionError:
    return AssertionError(
        f"{what}: the reliability table of docs/testing.md quotes it; update the table and"
        " tests/test_reliability_figures.py together"
    )


def _function(relative: str, name: str) -> ast.FunctionDef:
    for node in ast.walk(_module(relative)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise _missing(f"{relative} has no function {name}")


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _calls(node: ast.AST, name: str) -> list[ast.Call]:
    return [
        child
        for child in ast.walk(node)
        if isinstance(child, ast.Call) and _name(child.func) == name
    ]


def _one_call(node: ast.FunctionDef, name: str, where: str) -> ast.Call:
    calls = _calls(node, name)
    if len(calls) != 1:
        raise _missing(f"{where}: {node.name} makes {len(calls)} calls of {name}, not 1")
    return calls[0]


def _value(node: ast.expr) -> Any:
    """A literal, a name of :data:`KNOWN`, or arithmetic on them."""
    if isinstance(node, ast.Name) and node.id in KNOWN:
        return KNOWN[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left), _value(node.right)
        operations: dict[type[ast.operator], Any] = {
            ast.Add: lambda: left + right,
            ast.Sub: lambda: left - right,
            ast.Mult: lambda: left * right,
            ast.FloorDiv: lambda: left // right,
        }
        if type(node.op) in operations:
            return operations[type(node.op)]()
    return ast.literal_eval(node)


def _range_bound(loop: ast.For) -> int | None:
    """N of ``for ... in range(N)``."""
    iterated = loop.iter
    if (
        isinstance(iterated, ast.Call)
        and _name(iterated.func) == "range"
        and len(iterated.args) == 1
    ):
        bound: int = _value(iterated.args[0])
        return bound
    return None


def _loop_around(function: ast.FunctionDef, node: ast.AST) -> int:
    """How many times ``node`` may run: N of the ``for ... in range(N)`` around it, or 1."""
    for loop in ast.walk(function):
        if isinstance(loop, ast.For) and any(child is node for child in ast.walk(loop)):
            bound = _range_bound(loop)
            if bound is not None:
                return bound
    return 1


def _quantity(node: ast.expr) -> str | None:
    """What the left side of an ``assert X >= N`` counts."""
    text = ast.unparse(node)
    if text in ("kills", "report.kills"):
        return "kills"
    if text.startswith("sum(") and "executions" in text and "round" in text:
        return "round runs"  # the tool runs of the rounds' calls
    if text in ("ran", "executions") or (text.startswith("sum(") and "executions" in text):
        return "runs"
    if text == "killed_in_flight":
        return "in flight"
    return None


def _at_least(function: ast.FunctionDef, quantity: str) -> int | None:
    """N of the one ``assert <quantity> >= N`` in ``function`` (None if there is none)."""
    found = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Assert) or not isinstance(node.test, ast.Compare):
            continue
        test = node.test
        if [type(op) for op in test.ops] == [ast.GtE] and _quantity(test.left) == quantity:
            found.append(int(_value(test.comparators[0])))
    if len(found) > 1:
        raise _missing(f"{function.name} asserts {len(found)} minimums of {quantity}")
    return found[0] if found else None


def _assigned(function: ast.FunctionDef, name: str) -> Any:
    """The literal value assigned to ``name`` (``keys = 6`` or ``a, keys = x, 6``)."""
    for node in ast.walk(function):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == name:
                return _value(node.value)
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                for element, value in zip(target.elts, node.value.elts, strict=True):
                    if isinstance(element, ast.Name) and element.id == name:
                        return _value(value)
    raise _missing(f"{function.name} assigns no {name}")


def _module_constant(relative: str, name: str) -> Any:
    for node in _module(relative).body:
        if isinstance(node, ast.Assign) and [_name(t) for t in node.targets] == [name]:
            return _value(node.value)
    raise _missing(f"{relative} defines no {name}")


# --- the figures -------------------------------------------------------------------------


@dataclass(frozen=True)
class Storm:
    """One test's kill storms: the arguments of its ``kill_storm`` call (the storm's
    defaults for those it leaves out), how many storms it may run, the minimums it
    asserts over them."""

    workers: int
    rounds: int
    seconds: float
    keys: int
    storms: int
    kills: int | None
    runs: int | None
    round_runs: int | None


def _storm_of(call: ast.Call, function: ast.FunctionDef, checked: bool = True) -> Storm:
    given = {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}
    arguments = {
        name: _value(given[name]) if name in given else STORM_DEFAULTS[name]
        for name in ("workers", "rounds", "seconds", "keys")
    }
    if checked:
        assert _calls(function, "check"), f"{function.name} never calls report.check()"
    return Storm(
        workers=arguments["workers"],
        rounds=arguments["rounds"],
        seconds=arguments["seconds"],
        keys=arguments["keys"],
        storms=_loop_around(function, call),
        kills=_at_least(function, "kills") if checked else None,
        runs=_at_least(function, "runs") if checked else None,
        round_runs=_at_least(function, "round runs") if checked else None,
    )


def storm(relative: str, name: str) -> Storm:
    """The storms of the test ``name`` in ``relative``."""
    function = _function(relative, name)
    return _storm_of(_one_call(function, "kill_storm", relative), function)


def check_store_storm(name: str) -> Storm:
    """The storm ``check-store --storm`` runs (testing.check_store._storm's call), as the
    test ``name`` of tests/test_cli.py runs it: the command's report must say
    ``ok    kill_storm``."""
    test = _function(CLI_TESTS, name)
    storming = [
        call
        for call in _calls(test, "_check_store")
        if any(kw.arg == "storm" and _value(kw.value) is True for kw in call.keywords)
    ]
    assert len(storming) == 1, f"{name} runs check-store --storm {len(storming)} times"
    said = [node.value for node in ast.walk(test) if isinstance(node, ast.Constant)]
    assert "ok    kill_storm" in said, f"{name} does not check that the storm passed"
    command = _function(CHECK_STORE, "_storm")
    return _storm_of(_one_call(command, "kill_storm", CHECK_STORE), command, checked=False)


@dataclass(frozen=True)
class Garbage:
    """Garbage rows one suite writes (``write_raw``) and reads back."""

    read_back: int
    """By ``test_garbage_read_back_is_refused_without_showing_it``: the fixed values,
    then the Hypothesis examples."""
    listed: int
    """By ``test_listings_and_pruning_go_on_past_garbage`` (operable suites only)."""

    @property
    def generated(self) -> int:
        return self.read_back - len(GARBAGE_EXAMPLES)


@cache
def garbage() -> Garbage:
    """Count the rows the two garbage checks write, on MemoryStore's suite (tests/
    test_memory_store.py): every suite runs the same checks, so the same rows."""
    written: list[bytes] = []

    class Counting(memory_suite.TestMemoryStore):
        def write_raw(self, store: MemoryStore, key: str, raw: bytes) -> None:
            written.append(raw)
            super().write_raw(store, key, raw)

    counts = []
    for check in (
        "test_garbage_read_back_is_refused_without_showing_it",
        "test_listings_and_pruning_go_on_past_garbage",
    ):
        written.clear()
        suite = Counting()
        try:
            getattr(suite, check)()
        finally:
            suite.teardown_method()
        counts.append(len(written))
    return Garbage(read_back=counts[0], listed=counts[1])


@dataclass(frozen=True)
class Suite:
    file: str
    name: str
    operable: bool


SUITE_BASES = {"StoreConformance": False, "OperableStoreConformance": True}


@cache
def garbage_suites() -> tuple[Suite, ...]:
    """Every test class of tests/ that subclasses a conformance base and defines
    ``write_raw``: each one runs the garbage checks."""
    found = []
    for relative in _test_files("def write_raw"):
        for node in _module(relative).body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [_name(base) for base in node.bases]
            hooks = [f for f in node.body if isinstance(f, ast.FunctionDef)]
            if any(base in SUITE_BASES for base in bases) and any(
                f.name == "write_raw" for f in hooks
            ):
                operable = any(SUITE_BASES.get(base or "") for base in bases)
                found.append(Suite(relative, node.name, operable))
    return tuple(found)


def _test_files(holding: str) -> list[str]:
    """The test files (relative paths) whose text holds ``holding``."""
    return [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "tests").glob("test_*.py"))
        if path != Path(__file__).resolve() and holding in path.read_text(encoding="utf-8")
    ]


def garbage_of(store: str) -> tuple[int, int]:
    """(rows written and read back, suites) for ``store`` over all its suites."""
    rows = garbage()
    suites = [suite for suite in garbage_suites() if STORE_OF_SUITE_FILE.get(suite.file) == store]
    total = sum(rows.read_back + (rows.listed if suite.operable else 0) for suite in suites)
    return total, len(suites)


def free_running_kill_interval_ms() -> tuple[int, int]:
    """The free-running phase kills a worker every uniform(a, b) seconds: (a, b) in ms."""
    pause = _one_call(_function(PROCESSES, "run_free"), "uniform", PROCESSES)
    low, high = (_value(argument) for argument in pause.args)
    return round(low * 1000), round(high * 1000)


def round_kill_share() -> tuple[int, int]:
    """In a round with the workers up the storm draws one of its kinds of kill, "none"
    among them: (kinds that SIGKILL a worker, kinds)."""
    choices = [
        call
        for call in _calls(_function(PROCESSES, "race"), "choice")
        if isinstance(call.args[0], ast.List)
    ]
    assert len(choices) == 1, "the round's kind of kill is drawn once"
    kinds = _value(choices[0].args[0])
    return len([kind for kind in kinds if kind != "none"]), len(kinds)


@dataclass(frozen=True)
class Race:
    """tests/test_sqlite_store.py's race of processes for the same claims, no kill."""

    processes: int
    calls: int


def sqlite_race() -> Race:
    test = _function(SQLITE_TESTS, "test_two_processes_hammering_the_same_keys_run_each_tool_once")
    spawned = [
        node
        for node in ast.walk(test)
        if isinstance(node, ast.ListComp) and _calls(node.elt, "Popen")
    ]
    assert len(spawned) == 1, "the race spawns its processes in one list"
    names = _value(spawned[0].generators[0].iter)
    exactly_once = [ast.unparse(n.test) for n in ast.walk(test) if isinstance(n, ast.Assert)]
    assert "ran == Counter(range(keys))" in exactly_once, "the race asserts each ran once"
    return Race(processes=len(names), calls=_assigned(test, "keys"))


@dataclass(frozen=True)
class MidCommit:
    """tests/test_sqlite_store.py's writer process, SIGKILLed mid-commit again and again."""

    kills: int
    in_flight: int
    records: int


def sqlite_mid_commit() -> MidCommit:
    name = "test_a_process_killed_mid_commit_leaves_every_record_at_its_old_or_new_revision"
    test = _function(SQLITE_TESTS, name)
    signal = _one_call(test, "send_signal", SQLITE_TESTS)
    assert ast.unparse(signal.args[0]) == "signal.SIGKILL"
    in_flight = _at_least(test, "in flight")
    assert in_flight is not None, f"{name} asserts no minimum of kills in flight"
    return MidCommit(
        kills=_loop_around(test, signal), in_flight=in_flight, records=_assigned(test, "keys")
    )


# --- the table the tests would have the page say ----------------------------------------


def _n(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:,}"


def _at_least_cell(minimum: int | None, storms: int) -> str:
    if minimum is None:
        return "—"
    return f"{_n(minimum)} in all" if storms > 1 else _n(minimum)


def _storm_row(store: str, test: str, figures: Storm) -> list[str]:
    many = f"1 to {figures.storms} kill storms" if figures.storms > 1 else "kill storm"
    return [
        store,
        test.format(storms=many),
        _n(figures.workers),
        _n(figures.rounds),
        f"{_n(figures.seconds)} s over {_n(figures.keys)} calls",
        _at_least_cell(figures.kills, figures.storms),
        _runs_cell(figures),
        "—",
    ]


def _runs_cell(figures: Storm) -> str:
    said = [] if figures.runs is None else [_at_least_cell(figures.runs, figures.storms)]
    if figures.round_runs is not None:
        said.append(f"{_n(figures.round_runs)} in the rounds")
    return ", ".join(said) or "—"


def _garbage_row(store: str, test: str, workers: str = "—") -> list[str]:
    rows, suites = garbage_of(store)
    return [store, test, workers, "—", "—", "—", "—", f"{_n(rows)} in {suites} suites"]


def header() -> list[str]:
    killing, kinds = round_kill_share()
    low, high = free_running_kill_interval_ms()
    rows = garbage()
    return [
        "Store",
        "Test (each in one `make test` run)",
        "Worker processes",
        f"Rounds raced (a SIGKILL drawn in {killing} of {kinds} while the workers are up)",
        f"Free running (a SIGKILL every {low} to {high} ms)",
        "SIGKILLs, at least",
        "Tool runs checked, at least",
        (
            f"Garbage rows read back ({len(GARBAGE_EXAMPLES)} fixed and {rows.generated}"
            f" generated per suite, {rows.listed} more listed and pruned)"
        ),
    ]


def expected_rows() -> list[list[str]]:
    honest = _module_constant(STORM_TESTS, "HONEST")
    assert "tool_execution_checkpoint.stores.sqlite:SQLiteStore" in honest
    race, killed = sqlite_race(), sqlite_mid_commit()
    sqlite, postgres, redis = "`SQLiteStore`", "`PostgresStore`", "`RedisStore`"
    cluster = "Redis Cluster"
    check_store = "`check-store --storm` on a `{scheme}` URL (`tests/test_cli.py`)"
    return [
        _garbage_row(
            "`MemoryStore`",
            "conformance suites with `write_raw`, sync and async"
            " (`tests/test_memory_store.py`, `tests/test_store.py`)",
            workers="none: in-process only",
        ),
        _garbage_row(sqlite, "conformance suites with `write_raw` (`tests/test_sqlite_store.py`)"),
        _storm_row(
            sqlite,
            "{storms} at the defaults (`tests/test_processes.py`)",
            storm(STORM_TESTS, "test_an_honest_store_survives_the_default_storm"),
        ),
        _storm_row(
            sqlite,
            "{storms} through a `sqlite://` URL (`tests/test_processes.py`)",
            storm(STORM_TESTS, "test_a_url_store_storms_through_url_store"),
        ),
        _storm_row(
            sqlite,
            check_store.format(scheme="sqlite://"),
            check_store_storm(
                "test_check_store_on_a_sqlite_url_uses_a_new_directory_and_removes_it"
            ),
        ),
        _storm_row(
            sqlite,
            "{storms} (`tests/test_sqlite_store.py`)",
            storm(SQLITE_TESTS, "test_the_kill_storm_finds_sqlite_store_keeping_every_promise"),
        ),
        [
            sqlite,
            "processes claim the same calls at once, no kill (`tests/test_sqlite_store.py`)",
            _n(race.processes),
            "—",
            "—",
            "—",
            f"{_n(race.calls)}, each exactly once",
            "—",
        ],
        [
            sqlite,
            f"a writer killed mid-commit, {_n(killed.records)} records"
            " (`tests/test_sqlite_store.py`)",
            "1 at a time",
            "—",
            "—",
            f"{_n(killed.kills)} exactly, at least {_n(killed.in_flight)} of them mid-write",
            "—",
            "—",
        ],
        _garbage_row(
            postgres,
            "conformance suites with `write_raw`: its own pool, a caller's pool, async"
            " (`tests/test_postgres_store.py`)",
        ),
        _storm_row(
            postgres,
            "{storms}, a fresh database each (`tests/test_postgres_store.py`)",
            storm(POSTGRES_TESTS, "test_sigkilled_worker_processes_never_run_a_tool_twice"),
        ),
        _storm_row(
            postgres,
            check_store.format(scheme="postgresql://"),
            check_store_storm("test_check_store_on_a_postgres_url_uses_new_tables_and_drops_them"),
        ),
        _garbage_row(
            redis,
            "conformance suites with `write_raw`, sync and async (`tests/test_redis_store.py`)",
        ),
        _storm_row(
            redis,
            "{storms}, an emptied database each (`tests/test_redis_store.py`)",
            storm(REDIS_TESTS, "test_redis_store_survives_a_kill_storm"),
        ),
        _storm_row(
            redis,
            check_store.format(scheme="redis://"),
            check_store_storm(
                "test_check_store_on_a_redis_url_uses_new_prefixes_and_deletes_their_keys"
            ),
        ),
        _garbage_row(
            cluster,
            "conformance suites with `write_raw`, sync and async (`tests/test_redis_cluster.py`)",
        ),
        _storm_row(
            cluster,
            "{storms}, records on more than one shard (`tests/test_redis_cluster.py`)",
            storm(
                CLUSTER_TESTS,
                "test_the_cluster_store_survives_a_race_of_processes_and_a_kill_storm",
            ),
        ),
    ]


def render() -> str:
    """The Markdown block, markers included, that holds the tests' figures."""
    lines = [BEGIN, _line(header()), _line(["---"] * len(header()))]
    lines += [_line(row) for row in expected_rows()]
    return "\n".join([*lines, END])


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


# --- the page's table -------------------------------------------------------------------


def readme_table() -> list[list[str]]:
    """The cells of the table between the markers (header first, no separator line)."""
    text = README.read_text(encoding="utf-8")
    for marker in (BEGIN, END):
        assert marker in text, (
            f"{README} has no reliability table between {BEGIN!r} and {END!r}; the tests"
            f" would have it say:\n\n{render()}\n"
        )
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    rows = []
    for line in block.splitlines():
        if line.strip().startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-: ") for cell in cells):
                rows.append(cells)
    return rows


def numbers(cell: str) -> list[float]:
    return [float(found.replace(",", "")) for found in NUMBER.findall(cell)]


def _shown(cell: str) -> str:
    return "[" + ", ".join(_n(number) for number in numbers(cell)) + "]"


def test_the_readme_table_quotes_the_figures_the_tests_use() -> None:
    """Row by row, cell by cell, the README's numbers are the tests' (the wording is
    free); each row is the same store and names the same test files."""
    table = readme_table()
    wanted = [header(), *expected_rows()]
    problems = []
    if len(table) != len(wanted):
        problems.append(f"the page's table has {len(table) - 1} rows, not {len(wanted) - 1}")
    columns = wanted[0]
    for number, (said, meant) in enumerate(zip(table, wanted, strict=False)):
        where = "the header" if number == 0 else f"row {number} ({meant[0]}, {meant[1]})"
        if len(said) != len(meant):
            problems.append(f"{where}: {len(said)} cells, not {len(meant)}")
            continue
        if number > 0 and said[0] != meant[0]:
            problems.append(f"{where}: the store is {said[0]!r}, not {meant[0]!r}")
        missing = set(PATH.findall(meant[1])) - set(PATH.findall(said[1]))
        if number > 0 and missing:
            problems.append(f"{where}: the test cell does not name {sorted(missing)}")
        for column, cell, figure in zip(columns, said, meant, strict=True):
            if numbers(cell) != numbers(figure):
                problems.append(
                    f"{where}, column {column!r}: the page says {_shown(cell)},"
                    f" the tests {_shown(figure)}"
                )
    assert not problems, (
        "the reliability table of docs/testing.md is not what the tests do:\n"
        + "\n".join(f"- {problem}" for problem in problems)
        + f"\n\nthe tests would have it say:\n\n{render()}\n"
    )


def test_every_storm_on_a_store_of_the_package_is_in_the_table() -> None:
    """A new kill storm test, or a new check-store storm, needs a row (or a place in
    STORMS_ELSEWHERE)."""
    in_table = set()
    for row in expected_rows():
        in_table |= set(PATH.findall(row[1]))
    storming = set()
    for relative in sorted({*_test_files("kill_storm"), *_test_files("storm=True")}):
        for node in _module(relative).body:
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            storms = _calls(node, "kill_storm")
            storms += [
                call
                for call in _calls(node, "_check_store")
                if any(kw.arg == "storm" and _value(kw.value) is True for kw in call.keywords)
            ]
            if storms and node.name not in STORMS_ELSEWHERE:
                storming.add((relative, node.name))
    quoted = {
        (STORM_TESTS, "test_an_honest_store_survives_the_default_storm"),
        (STORM_TESTS, "test_a_url_store_storms_through_url_store"),
        (CLI_TESTS, "test_check_store_on_a_sqlite_url_uses_a_new_directory_and_removes_it"),
        (CLI_TESTS, "test_check_store_on_a_postgres_url_uses_new_tables_and_drops_them"),
        (CLI_TESTS, "test_check_store_on_a_redis_url_uses_new_prefixes_and_deletes_their_keys"),
        (SQLITE_TESTS, "test_the_kill_storm_finds_sqlite_store_keeping_every_promise"),
        (POSTGRES_TESTS, "test_sigkilled_worker_processes_never_run_a_tool_twice"),
        (REDIS_TESTS, "test_redis_store_survives_a_kill_storm"),
        (CLUSTER_TESTS, "test_the_cluster_store_survives_a_race_of_processes_and_a_kill_storm"),
    }
    assert storming == quoted, f"storms not in the page's table: {sorted(storming - quoted)}"
    assert {relative for relative, _ in quoted} <= in_table


def test_every_garbage_suite_is_counted_for_its_store() -> None:
    """A suite with ``write_raw`` in a new file needs a store in STORE_OF_SUITE_FILE (or
    a place in OWN_TEST_STORES): its rows count for that store."""
    unplaced = [
        f"{suite.file}::{suite.name}"
        for suite in garbage_suites()
        if suite.file not in STORE_OF_SUITE_FILE and suite.file not in OWN_TEST_STORES
    ]
    assert not unplaced, f"garbage suites of no store in the table: {unplaced}"
    rows = garbage()
    assert rows.read_back == len(GARBAGE_EXAMPLES) + rows.generated
    assert rows.generated > 0
    assert rows.listed > 0
