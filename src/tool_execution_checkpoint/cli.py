"""The command line: ``tool-checkpoint`` (or ``python -m tool_execution_checkpoint``).

Commands:
  demo   the README's main job: one agent turn on the embedded SQLite store in which the
         tool runs, the result's POST fails, the host restarts, and recovery delivers the
         stored result without running the tool again.
  spec   print the transition table as text, Markdown, Mermaid or JSON.

Exit codes: 0 success; 1 the demo saw the tool run more than once; 2 bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .fingerprint import fingerprint
from .records import Binding
from .rendering import render_markdown, render_mermaid
from .runner import RunOutcome, run_once
from .sqlite import SQLiteStore
from .store import checkpoint_key
from .table import TABLE

__all__ = ["main"]


def _show(step: str, outcome: RunOutcome) -> None:
    record = outcome.record
    where = f"{record.status} at revision {record.revision}" if record else "no record"
    ran = "ran the tool" if outcome.ran_tool else "did not run the tool"
    print(f"{step:<34} -> {outcome.status:<26} ({where}; {ran})")


def demo(path: Path) -> int:
    """Run the scripted turn on the SQLite file ``path``; return the exit code."""
    arguments = {"to": "ada@example.com", "subject": "Your receipt"}
    binding = Binding(
        namespace="demo",
        call_id="conversation-42/turn-7/call-1",
        tool_name="send_email",
        tool_revision="1",
        input_fingerprint=fingerprint(arguments),
    )
    emails: list[str] = []

    def send_email() -> dict[str, str]:
        emails.append(arguments["to"])
        return {"messageId": f"m-{len(emails)}", "to": arguments["to"]}

    def post_fails(payload: object) -> None:
        del payload  # never reaches the provider
        raise ConnectionResetError("the connection to the model provider was reset")

    delivered: list[object] = []
    print(f"store: SQLiteStore at {path}")
    print(f"key:   {checkpoint_key(binding)}")
    first_host = SQLiteStore(path)
    _show("host 1: tool call, POST fails", run_once(first_host, binding, send_email, post_fails))
    first_host.close()
    print("host 1 restarts; the provider still shows the tool call unanswered")
    second_host = SQLiteStore(path)
    _show(
        "host 2: same tool call again", run_once(second_host, binding, send_email, delivered.append)
    )
    _show("host 2: a late duplicate", run_once(second_host, binding, send_email, delivered.append))
    second_host.close()
    print(f"e-mails sent: {len(emails)}; results delivered: {len(delivered)}")
    if len(emails) != 1:
        print("FAILED: the tool ran more than once", file=sys.stderr)
        return 1
    return 0


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        items = [_jsonable(item) for item in value]
        return sorted(items) if isinstance(value, frozenset | set) else items
    return value


def spec(form: str) -> str:
    """The transition table in ``form``: text, markdown, mermaid or json."""
    if form == "markdown":
        return render_markdown(TABLE)
    if form == "mermaid":
        return render_mermaid(TABLE)
    if form == "json":
        return json.dumps(_jsonable(TABLE), indent=2, ensure_ascii=False) + "\n"
    lines = ["statuses:"]
    lines += [f"  {r.status:<11} decide -> {r.action}" for r in TABLE.statuses.values()]
    lines.append("transitions:")
    for rule in TABLE.transitions.values():
        sources = ",".join(rule.sources)
        lines.append(
            f"  {rule.name:<25} {sources:<20} -> {rule.target:<11}"
            f" fence={rule.fence} grants={rule.grants}"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="tool-checkpoint", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run_demo = commands.add_parser(
        "demo", help="the tool runs once, the POST fails, recovery delivers"
    )
    run_demo.add_argument(
        "--path", type=Path, help="the SQLite file (default: a new temporary one)"
    )
    show = commands.add_parser("spec", help="print the transition table")
    show.add_argument("--format", choices=["text", "markdown", "mermaid", "json"], default="text")
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.path is not None:
            return demo(args.path)
        with tempfile.TemporaryDirectory() as directory:
            return demo(Path(directory) / "checkpoints.db")
    sys.stdout.write(spec(args.format))
    return 0
