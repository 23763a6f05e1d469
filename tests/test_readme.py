"""The README's promises: it stays short, its commands exist, its links lead somewhere,
every error code is documented, the Performance page quotes the recorded run, and CI runs
the test command it gives. (Every code block of the README and of docs/ runs in
tests/test_docs.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tool_execution_checkpoint import ErrorCode

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
MAX_README_LINES = 300
BLOCKS = [
    found
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    for found in re.findall(
        r"^```(\w+)\n(.*?)^```$", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL
    )
]
PYTHON_BLOCKS = [body for language, body in BLOCKS if language == "python"]


def test_the_readme_is_at_most_300_lines() -> None:
    assert len(README.splitlines()) <= MAX_README_LINES


def test_every_relative_link_of_the_readme_names_a_file() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    assert [link for link in local if not (ROOT / link).is_file()] == []


def test_quick_start_is_the_demo_script_and_prints_what_the_docs_say() -> None:
    quickstart = ROOT / "examples" / "quickstart.py"
    assert quickstart.read_text(encoding="utf-8") in PYTHON_BLOCKS
    printed = subprocess.run(
        [sys.executable, str(quickstart)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    shown = [body for language, body in BLOCKS if language == "text"]
    assert printed in shown, printed


def test_quick_start_commands_are_make_targets() -> None:
    quick_start = README[README.index("## Quick start") : README.index("## Install")]
    commands = re.findall(r"^make (\w+)", quick_start, flags=re.MULTILINE)
    assert commands == ["demo", "test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for command in commands:
        assert re.search(rf"^{command}:", makefile, flags=re.MULTILINE), command


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, flags=re.MULTILINE)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_troubleshooting_covers_every_error_code(code: ErrorCode) -> None:
    troubleshooting = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    section = troubleshooting[troubleshooting.index(f"## `{code}`") :]
    assert "**Means:**" in section
    assert "**Do:**" in section


# The Performance page's table rows (docs/performance.md), and the figure of
# benchmarks/results.json each one quotes.
PERFORMANCE_ROWS = {
    "core lifecycle, contracts on": "core.lifecycle.contracts_on",
    "core lifecycle, contracts off": "core.lifecycle.contracts_off",
    "validate a 64 KiB payload": "validation.64kib",
    "validate a 10 MiB payload": "validation.10mib",
    "run_once, SQLiteStore, 1 worker, contracts off": "stores.sqlite.1_worker_contracts_off",
    "run_once, PostgresStore, 1 worker, contracts off": "stores.postgres.1_worker_contracts_off",
    "run_once, RedisStore, 1 worker, contracts off": "stores.redis.1_worker_contracts_off",
    **{
        f"{label} guarded call, {workers.replace('_', ' ')}: {name}": (
            f"peers.{server}.{workers}.{key}"
        )
        for server, label, store in (
            ("postgres", "PostgreSQL", "postgresstore"),
            ("redis", "Redis", "redisstore"),
        )
        for workers in ("1_worker", "8_workers")
        for name, key in (
            ("run_once", f"run_once.{store}"),
            ("run_once_async", f"run_once_async.async{store}"),
            ("@checkpointed", f"@checkpointed.{store}"),
            ("@checkpointed async", f"@checkpointed_async.async{store}"),
            ("the best guard row", "best_guard"),
            ("the same three writes, raw", "the_same_three_writes.raw"),
            ("the first two writes, raw", "the_first_two_writes.raw"),
        )
    },
}


def test_the_performance_table_quotes_the_recorded_runs() -> None:
    """Every row of the Performance page's table is a figure of benchmarks/ recorded
    runs, with the ratio and the verdict that run gave (so a new record without the
    page's table, or the other way round, fails)."""
    section = (DOCS / "performance.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (.+?) \| ([\d.]+)x \| (.+?) \| (.+?) \|$", section, re.MULTILINE)
    assert len(rows) >= 15
    figures = json.loads((ROOT / "benchmarks" / "results.json").read_text(encoding="utf-8"))[
        "figures"
    ]
    for label, ratio, target, result in rows:
        row = re.sub(r" \(.*?\)$", "", label.replace("`", ""))  # the baseline's note
        assert row in PERFORMANCE_ROWS, row
        figure = figures[PERFORMANCE_ROWS[row]]
        assert ratio == f"{figure['ratio']:.2f}", (row, ratio, figure["ratio"])
        if figure["target"] is None:
            assert (target, result) == ("-", "-"), row
        else:
            assert target == f"<= {figure['target']:g}x", row
            assert result == ("pass" if figure["passed"] else "MISS"), row
