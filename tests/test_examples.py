"""Every example in examples/ runs to completion (each asserts its own story)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert {path.name for path in EXAMPLES} >= {"cas_store.py", "quickstart.py"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_example_runs(example: Path, tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
