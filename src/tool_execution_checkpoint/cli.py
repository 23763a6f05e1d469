"""The command line: ``tool-checkpoint`` (or ``python -m tool_execution_checkpoint``).

Commands:
  demo       the README's main job: one agent turn on the embedded SQLite store in which
             the tool runs, the result's POST fails, the host restarts, and recovery
             delivers the stored result without running the tool again.
  spec       print the transition table as text, Markdown, Mermaid or JSON.
  inspect    read a record (a JSON file, stdin, or a store URL and key): valid or not,
             and what decide says.
  show       the whole record under a key (the payload only with --payload).
  list       records by status and minimum age, with their keys and ages (on the
             store's clock).
  reconcile  settle a stuck record through the table's transitions, by compare-and-swap
             from the revision the operator saw (see :mod:`.operations`).
  prune      drop the payloads of delivered records older than a retention window (on
             the store's clock).
  check-store
             run the conformance checks, the model-based harness and the threaded stress
             against a store factory (module:callable returning a fresh, empty store) or a
             store URL (each check gets a fresh, empty table, key prefix or file inside the
             target, removed afterwards; existing records are never touched).

Store URLs: sqlite:///absolute/path or sqlite:relative/path, postgresql://...,
redis://... (the last two need the postgres or redis extra). A command never creates a
store: a SQLite file that does not exist is refused.

The exit codes are :class:`Exit`; no message shows a URL's password, and none shows a
payload unless ``show --payload`` asks for it.

``list`` and ``prune`` show progress on stderr (see :mod:`.progress`): a line redrawn in
place on a terminal, nothing but rare plain lines otherwise, so piped output stays clean.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import parse_qsl, unquote, urlsplit

from .errors import CheckpointError, ErrorCode
from .fingerprint import fingerprint
from .operations import (
    DEFAULT_MIN_AGE_US,
    ClaimTooYoung,
    NoRecord,
    Reconciliation,
    RevisionMoved,
    complete_stuck_execution,
    confirm_stuck_delivery,
    mark_stuck_uncertain,
    prune_delivered,
    read_record,
    record_age_us,
    release_stuck_delivery,
)
from .progress import Progress
from .records import Binding, Checkpoint, Result
from .rendering import render_markdown, render_mermaid
from .runner import RunOutcome, run_once
from .stores.core import BrokenRecord, RecordSummary, StoreError, check_key, checkpoint_key
from .stores.opening import is_store_url, store_options, url_scheme
from .stores.opening import open_store as open_url_store
from .stores.sqlite import SQLiteStore
from .table import TABLE, Status
from .validation import check_identifier, check_reason

__all__ = ["Exit", "main"]


class Exit(enum.IntEnum):
    """The command line's exit codes: each means one thing (see :data:`EXIT_MEANINGS`)."""

    OK = 0
    TOOL_RAN_TWICE = 1
    USAGE = 2
    INVALID_RECORD = 3
    STORE_FAILED = 4
    CHECK_FAILED = 5
    NO_RECORD = 6
    REVISION_MOVED = 7
    NOT_ALLOWED = 8
    TOO_YOUNG = 9


EXIT_MEANINGS: dict[Exit, str] = {
    Exit.OK: "success",
    Exit.TOOL_RAN_TWICE: "the demo saw the tool run more than once",
    Exit.USAGE: "bad usage: a bad argument or input file, or a store URL that cannot be "
    "parsed or names no store",
    Exit.INVALID_RECORD: "the record read does not validate (its error code is shown)",
    Exit.STORE_FAILED: "the store failed: unreachable, refused, a missing SQLite file, "
    "directory or rights, no PostgreSQL checkpoint table, or check-store's scratch space "
    "left behind",
    Exit.CHECK_FAILED: "check-store: the store failed a conformance check",
    Exit.NO_RECORD: "no record under the key",
    Exit.REVISION_MOVED: "reconcile: the record is not at the revision given; nothing was written",
    Exit.NOT_ALLOWED: "reconcile: the record's status does not allow it "
    "(INVALID_TRANSITION); nothing was written",
    Exit.TOO_YOUNG: "reconcile: the record was last written less than --min-age ago (15m by "
    "default, on the store's clock): its worker may still be running; nothing was written",
}
"""What each exit code means, as the README and ``--help`` say it."""

EXIT_CODES_HELP = "exit codes:\n" + "\n".join(
    f"  {code.value}  {meaning}" for code, meaning in EXIT_MEANINGS.items()
)


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


def url_secrets(url: str) -> tuple[str, ...]:
    """The passwords a store URL carries (its user info's and a ``password=`` query
    parameter's), as written and percent-decoded: what no message may show."""
    try:
        parts = urlsplit(url)
        found = [parts.password or ""]
        found += [value for name, value in parse_qsl(parts.query) if name == "password"]
    except ValueError:  # unparseable: hide the part after the scheme that may hold one
        found = [url.split("://", 1)[-1]]
    both = {form for value in found for form in (value, unquote(value)) if form}
    return tuple(sorted(both, key=len, reverse=True))


def redact(text: str, hidden: Iterable[str]) -> str:
    """``text`` with every one of ``hidden`` replaced by ``***``."""
    for secret in hidden:
        text = text.replace(secret, "***")
    return text


_LOCATION = ("schema", "table", "prefix")
"""The command line's options that say where the records are, beyond the URL."""


def open_store(url: str, **location: str) -> Any:
    """Open the store a URL names for a command, with
    :func:`~tool_execution_checkpoint.stores.opening.open_store` and ``create=False``: never
    creating one (a SQLite file that does not exist, and a PostgreSQL table that does not,
    are a StoreError, exit 4). ``location`` (``schema=``,
    ``table=``, ``prefix=``) goes to the store; one the URL's store does not take, and a
    URL no store registered, are usage errors (exit 2), refused before anything is
    opened."""
    if not is_store_url(url):
        if url_scheme(url) is None and ":" not in url:
            # Never echoed: it may be a libpq connection string, with its password.
            raise _UsageError(f"{_NOT_A_URL} (for a SQLite file: sqlite:PATH)")
        raise _UsageError(_NOT_A_URL)
    takes = store_options(url)  # CheckpointError for a store whose extra is missing
    for name in location:
        if takes is not None and name not in takes:
            flags = ", ".join(f"--{option}" for option in _LOCATION if option in takes)
            hint = f" (it takes {flags})" if flags else ""
            raise _UsageError(f"--{name} does not apply to a {url_scheme(url)} URL{hint}")
    return open_url_store(url, create=False, **location)


_NOT_A_URL = (
    "not a store URL: write sqlite:///absolute/path, sqlite:relative/path, "
    "postgresql://... or redis://..."
)

_SQLITE_HEADER = b"SQLite format 3\x00"


_UNREADABLE: Any = object()

MAX_INPUT_BYTES = TABLE.limits.ceiling_max_payload_bytes + 1024 * 1024
"""The most a file or stdin given to the command line may hold: the payload ceiling and
1 MiB for the record around it."""


def _openable(path: str) -> bool:
    """Whether ``path`` can name a file here: no NUL, nothing the file system's encoding
    refuses (a lone surrogate)."""
    try:
        return b"\x00" not in os.fsencode(path)
    except UnicodeEncodeError:
        return False


def _read_input(what: str, source: str | None) -> bytes:
    """The bytes of the file ``source`` (stdin for None or ``-``), at most
    :data:`MAX_INPUT_BYTES`; more is a usage error, before any more is read."""
    data: bytes
    if source in (None, "-"):
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is not None:
            data = stdin.read(MAX_INPUT_BYTES + 1)
        else:
            data = sys.stdin.read(MAX_INPUT_BYTES + 1).encode("utf-8", "surrogateescape")
    else:
        if not _openable(str(source)):
            raise _UsageError(f"{what} is not a path this system can open")
        with Path(str(source)).open("rb") as file:
            data = file.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise _UsageError(f"{what} holds more than {MAX_INPUT_BYTES} bytes")
    return data


def _inspect(source: str | None, url: str | None, key: str | None, location: dict[str, str]) -> int:
    if url is None and location:
        raise _UsageError(f"--{next(iter(location))} needs --url")
    if url is not None:
        if key is None:
            raise _UsageError("--url needs --key")
        store = open_store(url, **location)
        try:
            raw: Any = store.get(key)
        finally:
            store.close()
        if raw is None:
            print("no record under that key")
            return Exit.NO_RECORD
    else:
        data = _read_input("inspect's file" if source not in (None, "-") else "stdin", source)
        if data.startswith(_SQLITE_HEADER):
            raise _UsageError(
                f"{source} is a SQLite store, not a JSON record: list its records with "
                f"'list sqlite:{source}', read one with 'show sqlite:{source} KEY'"
            )
        try:
            raw = json.loads(data)
        except (ValueError, RecursionError):  # UnicodeDecodeError, nesting past the stack
            raw = _UNREADABLE
        if raw is _UNREADABLE:
            print("invalid: INVALID_CHECKPOINT: not JSON in UTF-8 (or nested too deep)")
            return Exit.INVALID_RECORD
    try:
        record = Checkpoint.from_dict(raw, max_payload_bytes=TABLE.limits.ceiling_max_payload_bytes)
    except CheckpointError as error:
        print(f"invalid: {error}")
        return Exit.INVALID_RECORD
    action = TABLE.statuses[record.status].action
    print(f"valid: status={record.status} revision={record.revision} decide={action}")
    print(f"call: namespace={record.binding.namespace} call_id={record.binding.call_id}")
    return Exit.OK


def format_age(seconds: float) -> str:
    """An age as its two largest units: ``45s``, ``12m 5s``, ``3h 20m``, ``2d 4h``."""
    whole = max(0, int(seconds))
    units = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
    parts: list[str] = []
    for name, size in units:
        count, whole = divmod(whole, size)
        if count or parts:
            parts.append(f"{count}{name}")
    return " ".join(parts[:2]) or "0s"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3_600, "d": 86_400}


MAX_DURATION_SECONDS = 1_000_000 * 86_400
"""The longest duration the command line takes: 1,000,000 days (some 2,700 years; its
microseconds, subtracted from now, stay far inside a 64-bit integer)."""


def duration(text: str) -> float:
    """Seconds from a duration: a number with an optional unit, s, m, h or d (``90``,
    ``90s``, ``15m``, ``2h``, ``1.5d``), at most :data:`MAX_DURATION_SECONDS`. Raises
    ValueError for anything else."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or len(match.group(1)) > 32:
        raise ValueError("not a duration")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError("longer than the longest duration")
    return seconds


def _record_json(key: str, record: Checkpoint, age_us: int, *, payload: bool) -> dict[str, Any]:
    """What show prints as JSON: the key, decide's action, the age (since the store last
    wrote it, on its clock), the payload's size and the persisted record, its payload
    left out unless ``payload``."""
    stored = record.to_dict()
    if stored["result"] is not None and not payload:
        del stored["result"]["payload"]
    return {
        "key": key,
        "decide": str(TABLE.statuses[record.status].action),
        "ageSeconds": age_us / 1e6,
        "payloadBytes": None if record.result is None else record.result.payload_bytes,
        "record": stored,
    }


def _record_text(key: str, record: Checkpoint, age_us: int, *, payload: bool) -> str:
    """What show prints as text: one line per field."""
    binding = record.binding
    age = format_age(age_us / 1e6)
    lines = [
        ("key", key),
        ("status", f"{record.status} (decide: {TABLE.statuses[record.status].action})"),
        ("revision", str(record.revision)),
        ("namespace", binding.namespace),
        ("call id", binding.call_id),
        ("tool", f"{binding.tool_name}, revision {binding.tool_revision}"),
        ("input", binding.input_fingerprint),
        ("created", record.created_at),
        ("updated", f"{record.updated_at} (written {age} ago, on the store's clock)"),
    ]
    if (execution := record.execution) is not None:
        lines.append(("attempt id", execution.attempt_id))
        lines.append(("claimed", execution.claimed_at))
        if execution.uncertain is not None:
            lines.append(("uncertain", execution.uncertain.reason))
            lines.append(("since", execution.uncertain.at))
    if (result := record.result) is not None:
        lines.append(("completed", result.completed_at))
        if result.pruned_at is not None:
            lines.append(("pruned", f"{result.pruned_at} (the payload was dropped)"))
        else:
            lines.append(("payload", f"{result.payload_bytes:,} bytes of JSON"))
    if (delivery := record.delivery) is not None:
        lines.append(("delivery id", delivery.delivery_id))
        lines.append(("delivery claimed", delivery.claimed_at))
        if delivery.delivered_at is not None:
            lines.append(("delivered", delivery.delivered_at))
    text = "\n".join(f"{name + ':':<17} {value}" for name, value in lines) + "\n"
    if result is not None and result.pruned_at is None:
        if payload:
            text += result.payload_json + "\n"
        else:
            text += "(payload not shown: it may hold secrets; pass --payload to see it)\n"
    return text


def _show_record(url: str, key: str, payload: bool, form: str, location: dict[str, str]) -> int:
    store = open_store(url, **location)
    try:
        record = read_record(store, key)
        age = record_age_us(store, key, record, at=datetime.now(UTC).isoformat())
    finally:
        store.close()
    if form == "json":
        shown = _record_json(key, record, age, payload=payload)
        print(json.dumps(shown, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(_record_text(key, record, age, payload=payload))
    return Exit.OK


def _list(
    url: str, statuses: list[str], older_than: float, form: str, location: dict[str, str]
) -> int:
    wanted = [Status(status) for status in statuses] or list(Status)
    store = open_store(url, **location)
    rows: list[RecordSummary | BrokenRecord] = []
    try:
        now = store.clock_us()  # ages are the store's: never the writers' clocks
        before = now - int(older_than * 1e6) if older_than > 0 else None
        after = None
        with Progress("listing", unit="records") as progress:
            while page := store.list_records(
                wanted, written_before_us=before, after_key=after, limit=500
            ):
                rows += page
                after = page[-1].key
                progress.update(len(rows))
    finally:
        store.close()
    if form == "json":
        listed = [
            _jsonable(row) | {"broken": True}
            if isinstance(row, BrokenRecord)
            else _jsonable(row) | {"age_seconds": (now - row.written_us) / 1e6}
            for row in rows
        ]
        print(json.dumps(listed, indent=2, ensure_ascii=False))
    else:
        print(f"{'key':<69} {'status':<11} {'rev':>4} {'age':>7}  {'namespace':<16} call_id")
        for row in rows:
            if isinstance(row, BrokenRecord):  # its stored value is not a valid record
                print(f"{row.key:<69} {'broken':<11} {'-':>4} {'-':>7}  {row.reason}")
                continue
            age = format_age((now - row.written_us) / 1e6)
            print(
                f"{row.key:<69} {row.status:<11} {row.revision:>4} {age:>7}  "
                f"{row.namespace:<16} {row.call_id}"
            )
    return Exit.OK


def _read_found(source: str) -> object:
    """The JSON value in the file ``source`` (``-`` for stdin), for ``--complete``.

    A file that is not JSON in UTF-8 is a usage error raised outside the ``except``: the
    refusal's context would otherwise hold the file's text (a JSONDecodeError keeps all
    of it in ``.doc``, a UnicodeDecodeError the bytes in ``.object``), the payload."""
    data = _read_input("--complete's file", source)
    found: object = _UNREADABLE
    try:
        found = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        found = _UNREADABLE
    if found is _UNREADABLE:
        raise _UsageError("--complete takes a file of JSON in UTF-8 (- for stdin)")
    return found


def _found_payload(args: argparse.Namespace, at: str) -> object:
    """The payload ``--complete FILE`` or ``--complete-error TYPE`` gives, checked."""
    if args.complete is not None:
        found = _read_found(args.complete)
    else:
        kind = check_identifier(args.complete_error, "--complete-error", ErrorCode.INVALID_ARGUMENT)
        found = {"error": {"type": kind}}
    Result(found, completed_at=at, max_payload_bytes=args.max_payload_bytes)  # checks only
    return found


def _reconcile(args: argparse.Namespace, location: dict[str, str]) -> int:
    """Check every argument, then take the one reconciliation asked for."""
    at = datetime.now(UTC).isoformat()
    key, revision, dry_run = check_key(args.key), args.revision, args.dry_run
    min_age = int(args.min_age * 1e6)
    completing = args.complete is not None or args.complete_error is not None
    found = _found_payload(args, at) if completing else None
    if args.mark_uncertain is not None:
        check_reason(args.mark_uncertain, "--mark-uncertain", ErrorCode.INVALID_ARGUMENT)
    store = open_store(args.url, **location)
    try:
        done: Reconciliation
        if completing:
            done = complete_stuck_execution(
                store,
                key,
                expected_revision=revision,
                result=found,
                at=at,
                dry_run=dry_run,
                min_age_us=min_age,
                max_payload_bytes=args.max_payload_bytes,
            )
        elif args.mark_uncertain is not None:
            done = mark_stuck_uncertain(
                store,
                key,
                expected_revision=revision,
                reason=args.mark_uncertain,
                at=at,
                dry_run=dry_run,
                min_age_us=min_age,
            )
        else:
            settle = release_stuck_delivery if args.release_delivery else confirm_stuck_delivery
            done = settle(
                store, key, expected_revision=revision, at=at, dry_run=dry_run, min_age_us=min_age
            )
    finally:
        store.close()
    if args.format == "json":
        shown = _record_json(key, done.after, 0, payload=False)
        report = {"transition": done.transition, "written": done.written, **shown}
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return Exit.OK
    before, after = done.before, done.after
    what = "written" if done.written else "dry run: nothing written"
    print(
        f"{done.transition}: {before.status} at revision {before.revision} -> "
        f"{after.status} at revision {after.revision} ({what})"
    )
    print("the record now:" if done.written else "the record it would write:")
    sys.stdout.write(_record_text(key, after, 0, payload=False))
    return Exit.OK


def _prune(url: str, retention: float, location: dict[str, str]) -> int:
    store = open_store(url, **location)
    try:
        with Progress("pruning", unit="delivered records examined") as progress:
            pruned = prune_delivered(
                store,
                retention_us=int(retention * 1e6),
                at=datetime.now(UTC).isoformat(),
                progress=progress.update,
            )
    finally:
        store.close()
    print(f"pruned {pruned.pruned} delivered payloads (the records stay as tombstones)")
    if pruned.broken:
        print(
            f"{len(pruned.broken)} records could not be read and were left as they are"
            " (their stored value is not a valid record; tec show KEY says why):"
        )
        for key in pruned.broken:
            print(f"  {key}")
    return 0


# --- check-store -------------------------------------------------------------------------

CHECK_STORE_HELP = """\
Run the conformance checks, the model-based harness and the threaded stress (and the
listing and pruning checks, when the store lists records) against a store, then print
one line per check. Needs the testing extra.

TARGET is either a factory, module:callable, returning a fresh, empty store on each
call, or a store URL. Every check, and every harness example, needs a fresh, empty store:
on a URL each gets a space of its own inside the target, created for it, and the command
removes them all at the end, also when a check fails or the run is stopped with Ctrl-C.
The records already there are never read or written:

  sqlite:///dir/file.db  creates a directory dir/.tec-check-XXXXXXXX holding one new
                         file per store (check-N.db, with its -wal and -shm files) and
                         deletes it; file.db itself is never opened.
  postgresql://...       creates one table per store, SCHEMA.tec_check_RUN_N (with its
                         index tec_check_RUN_N_status_updated), and drops each; SCHEMA
                         is --schema, public by default, and the role needs CREATE on
                         it.
  redis://...            writes under one key prefix per store, tec-check-RUN-N:, and
  redis+cluster://...    deletes every key matching tec-check-RUN-* (SCAN, then UNLINK,
                         on every master of a cluster); the store's Lua scripts stay in
                         the servers' script cache.

RUN is 8 random hex digits, new for each run; N counts the stores.

On a URL, the kill storm runs last (--no-storm skips it): 6 worker processes share one
more fresh store, each opening the URL itself, race for the same claims (60 rounds, every
worker's compare-and-swap from one revision released at once), then run free for 4 s,
while the command kills them with SIGKILL; then it checks that no tool ran twice and no
acknowledged write was lost or torn. It catches a store atomic only within one process.
A factory gets no storm: it makes a fresh store per call, and a storm needs one store
that several processes share.

Exit codes: 0 the store passed every check; 2 a bad factory or URL; 4 the store failed
(the first fresh store is tried before any check: unreachable server, wrong password,
missing rights), or the scratch space could not be removed (the message names it);
5 a check failed. No message shows the URL's password.
"""


def _testing(module: str) -> Any:
    """The module ``testing.<module>``; a usage error when the testing extra is missing."""
    try:
        importlib.import_module(f"{__package__}.testing")
    except ImportError:
        raise _UsageError(
            "install the testing extra: pip install 'tool-execution-checkpoint[testing]'"
        ) from None
    return importlib.import_module(f"{__package__}.testing.{module}")


def _takes(target: str) -> frozenset[str]:
    """The options the store a URL names takes (none for a factory or an unknown URL)."""
    return (store_options(target) if is_store_url(target) else None) or frozenset()


def _check_store(
    target: str, examples: int | None, schema: str | None, storm: bool, hidden: Sequence[str]
) -> int:
    """Run :func:`~tool_execution_checkpoint.testing.check_store.check_store`."""
    if schema is not None and "schema" not in _takes(target):
        raise _UsageError("--schema applies to a postgresql URL only")
    runner = _testing("check_store")
    try:
        failed = runner.check_store(
            target, examples=examples, schema=schema, storm=storm, hidden=hidden
        )
    except runner.BadTarget as error:
        raise _UsageError(str(error)) from None
    return Exit.CHECK_FAILED if failed else Exit.OK


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _duration_argument(text: str) -> float:
    try:
        return duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            "a duration is a number with an optional unit: 90, 90s, 15m, 2h, 1.5d; at most 1000000d"
        ) from None


def _exit_for(error: CheckpointError) -> Exit:
    """The exit code of a refusal: a transition the status does not allow, a stored
    record that does not validate, or a bad argument (the operator's own payload is
    checked before the store is read, and its errors name the field ``payload``)."""
    if error.code is ErrorCode.INVALID_TRANSITION:
        return Exit.NOT_ALLOWED
    if error.code in (ErrorCode.INVALID_CHECKPOINT, ErrorCode.UNSUPPORTED_SCHEMA):
        return Exit.INVALID_RECORD
    if error.code in (ErrorCode.PAYLOAD_NOT_JSON, ErrorCode.PAYLOAD_LIMIT_EXCEEDED):
        return Exit.USAGE if error.field == "payload" else Exit.INVALID_RECORD
    return Exit.USAGE


DESCRIPTION = """\
Run an AI agent's tool at most once and deliver its exact result: the demo, the
transition table, and an operator's tools to read, list, settle and prune the records
of a store.

store URLs: sqlite:///absolute/path or sqlite:relative/path (an existing file; no
command creates a store), postgresql://... (an existing table: --schema, --table),
redis://... or redis+cluster://... (the postgres and redis extras).
No message shows a URL's password; no command shows a payload unless show --payload.
"""

RECONCILE_HELP = """\
Settle a stuck record through the transition table, on behalf of the dead claim's owner
(its stored attempt id or delivery id), by compare-and-swap from REVISION, the revision
you saw in show or list: if the record moved, nothing is written (exit 7). Give one
action:

  --complete FILE          executing or uncertain -> completed, with the tool's result
                           found in its own system: a file of JSON (- for stdin). The
                           next delivery sends it; the tool never runs again.
  --complete-error TYPE    the same with the error payload {"error": {"type": TYPE}}, the
                           shape of a tool that raised, when the outcome cannot be found.
  --mark-uncertain REASON  executing -> uncertain: its worker is dead and the outcome is
                           not known yet (no secrets in REASON).
  --release-delivery       delivering -> completed: the provider's history does not show
                           the result, so the next delivery claim sends it again.
  --confirm-delivery       delivering -> delivered: the provider's history shows it.

--dry-run prints the record that would be written and writes nothing. A record last
written less than --min-age ago (15m by default; on the store's clock) is refused (exit
9): its worker may still be running. --min-age 0 acts at once on a claim whose worker is
known to be gone.
"""


_REFUSED_VALUE = re.compile(r"(invalid [^:]*: )(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors never show a value given: an argument may
    hold a secret (a password in a connection string, a payload)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith(("unrecognized arguments", "ambiguous option")):
            message = message.split(":", 1)[0] + " (not shown)"
        else:
            message = _REFUSED_VALUE.sub(r"\1the value given", message)
        self.print_usage(sys.stderr)
        self.exit(Exit.USAGE, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tool-checkpoint",
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    where = _Parser(add_help=False)
    places = where.add_argument_group("where the records are (default: the store's own)")
    places.add_argument("--schema", help="PostgreSQL: the table's schema (public)")
    places.add_argument("--table", help="PostgreSQL: the table (tec_checkpoint)")
    places.add_argument("--prefix", help="Redis: the key prefix (tec:)")
    run_demo = commands.add_parser(
        "demo", help="the tool runs once, the POST fails, recovery delivers"
    )
    run_demo.add_argument(
        "--path",
        type=Path,
        help="a new SQLite file, kept afterwards (default: a temporary file, deleted)",
    )
    table = commands.add_parser("spec", help="print the transition table")
    table.add_argument("--format", choices=["text", "markdown", "mermaid", "json"], default="text")
    look = commands.add_parser(
        "inspect", help="is a record valid, and what does decide say", parents=[where]
    )
    look.add_argument("file", nargs="?", help="a JSON record file, or - for stdin")
    look.add_argument("--url", help="read the record from this store instead")
    look.add_argument("--key", help="the record's key in that store")
    show = commands.add_parser(
        "show",
        help="the whole record under a key",
        description="The whole record under KEY (list shows the keys): status, revision, "
        "binding, times, attempt id, uncertainty reason, delivery id, payload size. The "
        "payload itself only with --payload: it may hold secrets.",
        parents=[where],
    )
    show.add_argument("url")
    show.add_argument("key")
    show.add_argument("--payload", action="store_true", help="also print the stored payload")
    show.add_argument("--format", choices=["text", "json"], default="text")
    listing = commands.add_parser(
        "list",
        help="records by status and minimum age, with their keys",
        description="List records by status and minimum age, with the key show and "
        "reconcile take and the time since the last update; 'list URL --status executing "
        "--older-than 1h' is the stuck-call report. Progress goes to stderr: a line redrawn "
        "in place on a terminal; elsewhere a plain line every 10 s at most.",
        parents=[where],
    )
    listing.add_argument("url")
    listing.add_argument("--status", action="append", default=[], choices=[str(s) for s in Status])
    listing.add_argument(
        "--older-than",
        type=_duration_argument,
        default=0.0,
        metavar="DURATION",
        help="last written at least this long ago, on the store's clock: 90, 15m, 2h, 1.5d",
    )
    listing.add_argument("--format", choices=["table", "json"], default="table")
    settling = commands.add_parser(
        "reconcile",
        help="settle a stuck record by CAS from the revision seen",
        description=RECONCILE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[where],
    )
    settling.add_argument("url")
    settling.add_argument("key")
    settling.add_argument("--revision", type=int, required=True, help="the revision you saw")
    actions = settling.add_mutually_exclusive_group(required=True)
    actions.add_argument("--complete", metavar="FILE")
    actions.add_argument("--complete-error", metavar="TYPE")
    actions.add_argument("--mark-uncertain", metavar="REASON")
    actions.add_argument("--release-delivery", action="store_true")
    actions.add_argument("--confirm-delivery", action="store_true")
    settling.add_argument("--dry-run", action="store_true", help="write nothing")
    settling.add_argument(
        "--min-age",
        type=_duration_argument,
        default=DEFAULT_MIN_AGE_US / 1e6,
        metavar="DURATION",
        help="refuse a record last written less than this long ago (15m; 0 to act at once)",
    )
    settling.add_argument(
        "--max-payload-bytes",
        type=_positive,
        default=TABLE.limits.default_max_payload_bytes,
        help="the limit the host reads the payload with (65536)",
    )
    settling.add_argument("--format", choices=["text", "json"], default="text")
    pruning = commands.add_parser(
        "prune",
        help="drop old delivered payloads, keep tombstones",
        description="Drop the payloads of delivered records last written longer ago than "
        "the retention, on the store's clock, keeping each record as a tombstone. Progress "
        "goes to stderr as for list.",
        parents=[where],
    )
    pruning.add_argument("url")
    pruning.add_argument("--retention", type=_duration_argument, required=True, metavar="DURATION")
    vet = commands.add_parser(
        "check-store",
        help="vet a store (a factory or a URL): conformance, harness, stress",
        description=CHECK_STORE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    vet.add_argument("target", metavar="TARGET", help="module:callable, or a store URL")
    vet.add_argument("--examples", type=_positive, help="harness examples (default: the profile's)")
    vet.add_argument("--schema", help="PostgreSQL URL: the schema for the new tables (public)")
    vet.add_argument(
        "--storm",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="URL: end with the kill storm (default: on)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's entry point; returns the exit code (see :class:`Exit`)."""
    args = _parser().parse_args(argv)
    location = {
        name: value
        for name in ("schema", "table", "prefix")
        if args.command in ("inspect", "show", "list", "reconcile", "prune")
        and (value := getattr(args, name)) is not None
    }
    url = args.target if args.command == "check-store" else getattr(args, "url", None)
    hidden = url_secrets(url) if url else ()
    try:
        if args.command == "check-store":
            return _check_store(args.target, args.examples, args.schema, args.storm, hidden)
        if args.command == "demo":
            if args.path is not None:
                return demo(args.path)
            with tempfile.TemporaryDirectory() as directory:
                return demo(Path(directory) / "checkpoints.db", temporary=True)
        if args.command == "inspect":
            return _inspect(args.file, args.url, args.key, location)
        if args.command == "show":
            return _show_record(args.url, args.key, args.payload, args.format, location)
        if args.command == "list":
            return _list(args.url, args.status, args.older_than, args.format, location)
        if args.command == "reconcile":
            return _reconcile(args, location)
        if args.command == "prune":
            return _prune(args.url, args.retention, location)
    except _UsageError as error:
        print(f"tool-checkpoint: {redact(str(error), hidden)}", file=sys.stderr)
        return Exit.USAGE
    except StoreError as error:
        print(f"tool-checkpoint: the store failed: {redact(str(error), hidden)}", file=sys.stderr)
        return Exit.STORE_FAILED
    except NoRecord as error:
        print(f"tool-checkpoint: {error}", file=sys.stderr)
        return Exit.NO_RECORD
    except RevisionMoved as error:
        print(f"tool-checkpoint: {error}; nothing was written", file=sys.stderr)
        return Exit.REVISION_MOVED
    except ClaimTooYoung as error:
        print(f"tool-checkpoint: {error}; nothing was written", file=sys.stderr)
        return Exit.TOO_YOUNG
    except CheckpointError as error:
        print(f"tool-checkpoint: {redact(str(error), hidden)}", file=sys.stderr)
        return _exit_for(error)
    except OSError as error:  # its text names the file: the reason alone is shown
        reason = error.strerror or type(error).__name__
        print(f"tool-checkpoint: a file could not be read: {reason}", file=sys.stderr)
        return Exit.USAGE
    sys.stdout.write(spec(args.format))
    return Exit.OK
