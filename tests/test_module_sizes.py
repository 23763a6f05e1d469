"""No module written by hand is over 600 lines; generated modules (tools/async_to_sync.py's
output, recognised by their first line) are exempt."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "tool_execution_checkpoint"
LIMIT = 600
GENERATED_MARK = "# Generated from "


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
    assert len(sizes) > 50  # the package was found, and generated modules are few
    assert {name: size for name, size in sizes.items() if size > LIMIT} == {}


def test_generated_modules_sit_beside_their_written_source() -> None:
    generated = [p for p in PACKAGE.rglob("*.py") if p.read_text().startswith(GENERATED_MARK)]
    assert generated  # the drivers' sync twins
    for path in generated:
        assert path.with_name(path.stem + "_async.py").exists()
