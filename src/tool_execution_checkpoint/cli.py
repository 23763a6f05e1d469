"""The command line: ``tool-checkpoint`` (or ``python -m tool_execution_checkpoint``).

Commands:
  demo     the README's main job: one agent turn on the embedded SQLite store in which
           the tool runs, the result's POST fails, the host restarts, and recovery
           delivers the stored result without running the tool again.
  spec     print the transition table as text, Markdown, Mermaid or JSON.
  inspect  read a record (a file, stdin, or a store URL and key): valid or not, and what
           decide says.
  list     list records by status and minimum age on a store URL.
  prune    drop the payloads of delivered records older than a retention window.
  check-store
           run the conformance checks, the model-based harness and the threaded stress
           against a store factory (module:callable returning a fresh, empty store).

Store URLs: sqlite:///path, postgresql://..., redis://... (the last two need the
postgres or redis extra).

Exit codes: 0 success; 1 the demo saw the tool run more than once; 2 bad usage or a bad
store URL; 3 an invalid record; 4 the store failed (unreachable, refused, ...); 5 the
store failed a conformance check.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import json
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import CheckpointError
from .fingerprint import fingerprint
from .operations import prune_delivered
from .records import Binding, Checkpoint
from .rendering import render_markdown, render_mermaid
from .runner import RunOutcome, run_once
from .sqlite import SQLiteStore
from .store import RecordSummary, StoreError, checkpoint_key
from .table import TABLE, Status
from .validation import timestamp_microseconds

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


class _UsageError(Exception):
    """A bad argument the parser could not see (exit 2)."""


def open_store(url: str) -> Any:
    """Open the store a URL names: sqlite:///path, postgresql://..., redis://..."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    try:
        if scheme == "sqlite":
            return SQLiteStore.from_url(url)
        # The optional stores are imported only when asked for: their drivers are extras.
        if scheme in ("postgresql", "postgres"):
            return importlib.import_module(f"{__package__}.postgres").PostgresStore.from_url(url)
        if scheme in ("redis", "rediss", "unix"):
            return importlib.import_module(f"{__package__}.redis_store").RedisStore.from_url(url)
    except ImportError:
        extra = "postgres" if scheme.startswith("postgres") else "redis"
        raise _UsageError(
            f"install the {extra} extra: pip install 'tool-execution-checkpoint[{extra}]'"
        ) from None
    raise _UsageError("a store URL starts with sqlite://, postgresql:// or redis://")


def _inspect(source: str | None, url: str | None, key: str | None) -> int:
    if url is not None:
        if key is None:
            raise _UsageError("--url needs --key")
        store = open_store(url)
        try:
            raw: Any = store.get(key)
        finally:
            store.close()
        if raw is None:
            print("no record under that key")
            return 3
    else:
        text = sys.stdin.read() if source in (None, "-") else Path(str(source)).read_text("utf-8")
        try:
            raw = json.loads(text)
        except ValueError:
            print("invalid: INVALID_CHECKPOINT: not JSON")
            return 3
    try:
        record = Checkpoint.from_dict(raw, max_payload_bytes=TABLE.limits.ceiling_max_payload_bytes)
    except CheckpointError as error:
        print(f"invalid: {error}")
        return 3
    action = TABLE.statuses[record.status].action
    print(f"valid: status={record.status} revision={record.revision} decide={action}")
    print(f"call: namespace={record.binding.namespace} call_id={record.binding.call_id}")
    return 0


def _list(url: str, statuses: list[str], older_than: float, form: str) -> int:
    wanted = [Status(status) for status in statuses] or list(Status)
    store = open_store(url)
    rows: list[RecordSummary] = []
    try:
        before = None
        if older_than > 0:
            before = timestamp_microseconds(datetime.now(UTC).isoformat()) - int(older_than * 1e6)
        after = None
        while page := store.list_records(
            wanted, updated_before_us=before, after_key=after, limit=500
        ):
            rows += page
            after = page[-1].key
            print(f"\rlisted {len(rows)} records", end="", file=sys.stderr, flush=True)
    finally:
        store.close()
    print(file=sys.stderr)
    if form == "json":
        print(json.dumps([_jsonable(row) for row in rows], indent=2, ensure_ascii=False))
    else:
        print(f"{'status':<11} {'rev':>4} {'updated':<32} {'namespace':<16} call_id")
        for row in rows:
            when = f"{row.updated_at:<32}"
            print(f"{row.status:<11} {row.revision:>4} {when} {row.namespace:<16} {row.call_id}")
    return 0


def _prune(url: str, retention: float) -> int:
    store = open_store(url)
    try:
        pruned = prune_delivered(
            store,
            retention_us=int(retention * 1e6),
            at=datetime.now(UTC).isoformat(),
            progress=lambda seen: print(
                f"\rexamined {seen} delivered records", end="", file=sys.stderr, flush=True
            ),
        )
    finally:
        store.close()
    print(file=sys.stderr)
    print(f"pruned {pruned} delivered payloads (the records stay as tombstones)")
    return 0


def _check_store(factory: str, examples: int | None) -> int:
    try:
        testing = importlib.import_module(f"{__package__}.testing")
        processes = importlib.import_module(f"{__package__}.testing.processes")
    except ImportError:
        raise _UsageError(
            "install the testing extra: pip install 'tool-execution-checkpoint[testing]'"
        ) from None
    try:
        make_store = processes.load_factory(factory)
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        raise _UsageError(f"cannot load the factory: {error}") from None
    probe = make_store()
    operable = hasattr(probe, "list_records")
    close = getattr(probe, "close", None)
    if callable(close):
        close()
    base = testing.OperableStoreConformance if operable else testing.StoreConformance
    checks = type(
        "CheckStore",
        (base,),
        {"make_store": staticmethod(make_store), "harness_examples": examples},
    )
    failed = 0
    for name in sorted(n for n in dir(checks) if n.startswith("test_")):
        suite = checks()
        try:
            getattr(suite, name)()
        except Exception as error:  # a failed check is reported, then the next one runs
            failed += 1
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            print(f"FAIL  {name[5:]}: {first}")
        else:
            print(f"ok    {name[5:]}")
        finally:
            suite.teardown_method()
    print(f"{failed} of the checks failed" if failed else "the store passed every check")
    return 5 if failed else 0


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
    look = commands.add_parser("inspect", help="is a record valid, and what does decide say")
    look.add_argument("file", nargs="?", help="a JSON record file, or - for stdin")
    look.add_argument("--url", help="read the record from this store instead")
    look.add_argument("--key", help="the record's key in that store")
    listing = commands.add_parser("list", help="records by status and minimum age")
    listing.add_argument("url")
    listing.add_argument("--status", action="append", default=[], choices=[str(s) for s in Status])
    listing.add_argument("--older-than", type=float, default=0.0, metavar="SECONDS")
    listing.add_argument("--format", choices=["table", "json"], default="table")
    pruning = commands.add_parser("prune", help="drop old delivered payloads, keep tombstones")
    pruning.add_argument("url")
    pruning.add_argument("--retention", type=float, required=True, metavar="SECONDS")
    vet = commands.add_parser("check-store", help="vet a store: conformance, harness, stress")
    vet.add_argument("factory", help="module:callable returning a fresh, empty store")
    vet.add_argument("--examples", type=int, help="harness examples (default: the profile's)")
    args = parser.parse_args(argv)
    try:
        if args.command == "check-store":
            return _check_store(args.factory, args.examples)
        if args.command == "demo":
            if args.path is not None:
                return demo(args.path)
            with tempfile.TemporaryDirectory() as directory:
                return demo(Path(directory) / "checkpoints.db")
        if args.command == "inspect":
            return _inspect(args.file, args.url, args.key)
        if args.command == "list":
            return _list(args.url, args.status, args.older_than, args.format)
        if args.command == "prune":
            return _prune(args.url, args.retention)
    except _UsageError as error:
        print(f"tool-checkpoint: {error}", file=sys.stderr)
        return 2
    except StoreError as error:
        print(f"tool-checkpoint: the store failed: {error}", file=sys.stderr)
        return 4
    except (CheckpointError, OSError) as error:
        print(f"tool-checkpoint: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(spec(args.format))
    return 0
