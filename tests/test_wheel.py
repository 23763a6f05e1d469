"""The built wheel carries the transition table and runs a transition from it alone."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
from importlib.metadata import version
import tool_execution_checkpoint as tec
from tool_execution_checkpoint.table import spec_file

binding = tec.Binding("wheel", "call-1", "tool", "1", "sha256:00")
claim = tec.claim_execution(
    tec.create_checkpoint(binding, created_at="2026-12-02T12:00:00Z").to_dict(),
    attempt_id="attempt-1",
    at="2026-12-02T12:00:01Z",
)
print(json.dumps({
    "table": str(spec_file("transitions.toml")),
    "module": tec.__file__,
    "version": version("tool-execution-checkpoint"),
    "action": str(claim.action),
    "status": str(claim.next.status),
    "revision": claim.next.revision,
}))
"""


def test_wheel_installs_in_a_fresh_venv_and_runs_a_transition(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for packaged in ("spec/transitions.toml", "spec/record.schema.json", "py.typed"):
        assert f"tool_execution_checkpoint/{packaged}" in names
    packaged_table = zipfile.ZipFile(wheel).read("tool_execution_checkpoint/spec/transitions.toml")
    assert packaged_table == (ROOT / "spec" / "transitions.toml").read_bytes()

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    run = subprocess.run(
        [str(python), "-I", "-c", PROBE],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seen = json.loads(run.stdout)
    site = str(venv / "lib")
    assert seen["module"].startswith(site), seen
    assert seen["table"].startswith(site), seen
    assert (seen["action"], seen["status"], seen["revision"]) == ("execute", "executing", 2)
