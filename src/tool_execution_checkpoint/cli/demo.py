"""``tool-checkpoint demo``: the README's main job, one agent turn on a new SQLite file in
which the tool runs, the result's POST fails, the host restarts, and recovery delivers
the stored result without running the tool again."""

from __future__ import annotations

import sys
from pathlib import Path

from ..fingerprint import fingerprint
from ..records import Binding
from ..runner import RunOutcome, run_once
from ..stores.core import checkpoint_key
from ..stores.sqlite import SQLiteStore
from .common import Exit

__all__ = ["demo"]


def _show(step: str, outcome: RunOutcome) -> None:
    record = outcome.record
    where = f"{record.status} at revision {record.revision}" if record else "no record"
    ran = "ran the tool" if outcome.ran_tool else "did not run the tool"
    print(f"{step:<34} -> {outcome.status:<26} ({where}; {ran})")


def demo(path: Path, *, temporary: bool = False) -> int:
    """Run the scripted turn on the new SQLite file ``path``; return the exit code.

    An existing file is refused (exit 2) and left alone: a second run on the same file
    would find the first run's record and rightly not run the tool at all. A
    ``temporary`` file is said to be deleted when the demo ends."""
    if path.exists():
        print(
            f"tool-checkpoint: {path} exists: the demo writes only a new file. Run on the "
            f"file of an earlier demo, it would find that run's record and rightly not run "
            f"the tool at all. Pass another --path, or delete {path}.",
            file=sys.stderr,
        )
        return Exit.USAGE
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
        raise ConnectionRefusedError("the model provider refused the connection")

    delivered: list[object] = []
    kept = "a temporary file, deleted when the demo ends" if temporary else "kept afterwards"
    print(f"store: SQLiteStore at {path} ({kept})")
    print(f"key:   {checkpoint_key(binding)}")
    first_host = SQLiteStore(path)
    _show("host 1: tool call, POST refused", run_once(first_host, binding, send_email, post_fails))
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
        return Exit.TOOL_RAN_TWICE
    if not temporary:
        print(f"see the record: tool-checkpoint show sqlite:{path} {checkpoint_key(binding)}")
    return Exit.OK
