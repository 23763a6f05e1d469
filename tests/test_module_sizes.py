"""No module written by hand is over 600 lines; generated modules (tools/async_to_sync.py's
output, recognised by their first line) are exempt."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "tool_execution_checkpoint"
LIMIT = 600
GENERATED_MARK = "# Generated from "

# Modules still over the limit while #35 splits them, each at its size when the limit was set:
# one may shrink (and must leave this list once under the limit) but never grow.
NOT_YET_SPLIT: dict[str, int] = {
    "cli.py": 1055,
    "records.py": 663,
    "stores/redis.py": 2017,
    "stores/sqlite.py": 1070,
    "testing/conformance.py": 860,
    "testing/contract.py": 701,
    "testing/processes.py": 648,
    "transitions.py": 967,
}


def _written_sizes() -> dict[str, int]:
    sizes = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if lines and lines[0].startswith(GENERATED_MARK):
            continue
        sizes[path.relative_to(PACKAGE).as_posix()] = len(lines)
    return sizes


def test_no_written_module_is_over_the_limit() -> None:
    sizes = _written_sizes()
    over = {name: size for name, size in sizes.items() if size > LIMIT}
    unexpected = {name: size for name, size in over.items() if name not in NOT_YET_SPLIT}
    assert unexpected == {}
    grown = {name: size for name, size in over.items() if size > NOT_YET_SPLIT[name]}
    assert grown == {}
    split = sorted(name for name in NOT_YET_SPLIT if sizes.get(name, 0) <= LIMIT)
    assert split == [], "remove these from NOT_YET_SPLIT"
