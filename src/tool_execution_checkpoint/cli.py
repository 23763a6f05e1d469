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
           against a store factory (module:callable returning a fresh, empty store) or a
           store URL (each check gets a fresh, empty table, key prefix or file inside the
           target, removed afterwards; existing records are never touched).

Store URLs: sqlite:///path, postgresql://..., redis://... (the last two need the
postgres or redis extra).

Exit codes: 0 success; 1 the demo saw the tool run more than once; 2 bad usage or a bad
store URL; 3 an invalid record; 4 the store failed (unreachable, refused, ...); 5 the
store failed a conformance check. No message shows a URL's password.

``list`` and ``prune`` show progress on stderr (see :mod:`.progress`): a line redrawn in
place on a terminal, nothing but rare plain lines otherwise, so piped output stays clean.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import json
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from .errors import CheckpointError
from .fingerprint import fingerprint
from .operations import prune_delivered
from .progress import Progress
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


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


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


def _sqlite_path(url: str) -> Path:
    """The file a sqlite URL names. The rules of :meth:`SQLiteStore.from_url`, checked
    before anything is opened so that a bad URL is a usage error (exit 2)."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    if parts.netloc or parts.fragment or not path.startswith("/") or path == "/:memory:":
        raise _UsageError(
            "a sqlite URL names a local file by its absolute path: sqlite:///absolute/path "
            "(no host, no fragment, not :memory:)"
        )
    if [name for name, _ in parse_qsl(parts.query, keep_blank_values=True)] not in (
        [],
        ["busy_timeout"],
    ):
        raise _UsageError("a sqlite URL accepts one query parameter, busy_timeout=SECONDS")
    return Path(path)


_LOCATION_OPTIONS: dict[str, tuple[str, ...]] = {
    "sqlite": (),
    **dict.fromkeys(("postgresql", "postgres"), ("schema", "table")),
    **dict.fromkeys(("redis", "rediss", "unix"), ("prefix",)),
}
"""Per URL scheme, the store options that say where the records are, beyond the URL."""


def open_store(url: str, **options: Any) -> Any:
    """Open the store a URL names: sqlite:///path, postgresql://..., redis://...
    ``options`` go to the PostgreSQL store (``schema=``, ``table=``) or the Redis store
    (``prefix=``); one the URL's kind of store does not take is a usage error. Nothing
    is contacted but a SQLite file; a URL the store cannot parse is a usage error."""
    scheme = _scheme(url)
    allowed = _LOCATION_OPTIONS.get(scheme, ())
    for name in options:
        if scheme in _LOCATION_OPTIONS and name not in allowed:
            takes = ", ".join(f"--{option}" for option in allowed)
            hint = f" (it takes {takes})" if takes else ""
            raise _UsageError(f"--{name} does not apply to a {scheme} URL{hint}")
    try:
        if scheme == "sqlite":
            _sqlite_path(url)
            return SQLiteStore.from_url(url)
        # The optional stores are imported only when asked for: their drivers are extras.
        if scheme in ("postgresql", "postgres"):
            module = importlib.import_module(f"{__package__}.postgres")
            return module.PostgresStore.from_url(url, **options)
        if scheme in ("redis", "rediss", "unix"):
            module = importlib.import_module(f"{__package__}.redis_store")
            try:
                return module.RedisStore.from_url(url, **options)
            except module.RedisConfigurationError:
                raise _UsageError(
                    "not a Redis URL redis-py can use (not shown: it may hold a password)"
                ) from None
    except ImportError:
        extra = "postgres" if scheme.startswith("postgres") else "redis"
        raise _UsageError(
            f"install the {extra} extra: pip install 'tool-execution-checkpoint[{extra}]'"
        ) from None
    raise _UsageError("a store URL starts with sqlite://, postgresql:// or redis://")


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


def _list(
    url: str, statuses: list[str], older_than: float, form: str, location: dict[str, str]
) -> int:
    wanted = [Status(status) for status in statuses] or list(Status)
    store = open_store(url, **location)
    rows: list[RecordSummary] = []
    try:
        before = None
        if older_than > 0:
            before = timestamp_microseconds(datetime.now(UTC).isoformat()) - int(older_than * 1e6)
        after = None
        with Progress("listing", unit="records") as progress:
            while page := store.list_records(
                wanted, updated_before_us=before, after_key=after, limit=500
            ):
                rows += page
                after = page[-1].key
                progress.update(len(rows))
    finally:
        store.close()
    if form == "json":
        print(json.dumps([_jsonable(row) for row in rows], indent=2, ensure_ascii=False))
    else:
        print(f"{'status':<11} {'rev':>4} {'updated':<32} {'namespace':<16} call_id")
        for row in rows:
            when = f"{row.updated_at:<32}"
            print(f"{row.status:<11} {row.revision:>4} {when} {row.namespace:<16} {row.call_id}")
    return 0


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
    print(f"pruned {pruned} delivered payloads (the records stay as tombstones)")
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
                         deletes every key matching tec-check-RUN-* (SCAN, then UNLINK);
                         the store's Lua scripts stay in the server's script cache.

RUN is 8 random hex digits, new for each run; N counts the stores.

Exit codes: 0 the store passed every check; 2 a bad factory or URL; 4 the store failed
(the first fresh store is tried before any check: unreachable server, wrong password,
missing rights), or the scratch space could not be removed (the message names it);
5 a check failed. No message shows the URL's password.
"""


class _Scratch:
    """Fresh, empty stores inside the target a store URL names, and their removal."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.run = secrets.token_hex(4)
        self.stores: list[Any] = []

    def describe(self) -> str:
        """What each store gets and what is removed at the end (no password)."""
        raise NotImplementedError

    def _open(self, number: int) -> Any:
        raise NotImplementedError

    def _remove(self) -> str:
        """Remove every store's space; return what was removed, or raise StoreError."""
        raise NotImplementedError

    def make_store(self) -> Any:
        """A new store in a space of its own, empty."""
        store = self._open(len(self.stores) + 1)
        self.stores.append(store)
        return store

    def remove(self) -> str:
        """Close every store still open, then remove their spaces; return what was
        removed. Raises StoreError when something could not be removed."""
        if not self.stores:
            return "nothing to remove"
        for store in self.stores:
            store.close()
        return self._remove()


class _SQLiteScratch(_Scratch):
    """A new directory beside the URL's file, one new file per store."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.parent = _sqlite_path(url).parent
        self.query = urlsplit(url).query
        self.directory: Path | None = None

    def describe(self) -> str:
        return (
            f"each check gets a new SQLite file in a new directory {self.parent}/"
            f".tec-check-XXXXXXXX, deleted afterwards"
        )

    def _open(self, number: int) -> Any:
        if self.directory is None:
            try:
                self.directory = Path(tempfile.mkdtemp(prefix=".tec-check-", dir=self.parent))
            except OSError as error:
                raise StoreError(
                    f"cannot create a directory in {self.parent}: {error.strerror}; "
                    f"the directory must exist and be writable"
                ) from None
        path = quote(str(self.directory / f"check-{number}.db"))
        return SQLiteStore.from_url(f"sqlite://{path}" + (f"?{self.query}" if self.query else ""))

    def _remove(self) -> str:
        if self.directory is None:
            return "nothing to remove"
        try:
            shutil.rmtree(self.directory)
        except OSError as error:
            raise StoreError(
                f"could not delete the directory {self.directory} ({error.strerror}): "
                f"delete it by hand"
            ) from None
        return f"deleted the directory {self.directory}"


class _PostgresScratch(_Scratch):
    """A new table per store, in the schema given (public by default)."""

    def __init__(self, url: str, schema: str) -> None:
        super().__init__(url)
        self.schema = schema

    def describe(self) -> str:
        return (
            f"each check gets a new table {self.schema}.tec_check_{self.run}_N, dropped afterwards"
        )

    def _open(self, number: int) -> Any:
        return open_store(self.url, schema=self.schema, table=f"tec_check_{self.run}_{number}")

    def _remove(self) -> str:
        psycopg = importlib.import_module("psycopg")
        sql = importlib.import_module("psycopg.sql")
        tables = [f"tec_check_{self.run}_{number}" for number in range(1, len(self.stores) + 1)]
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as connection:
                for table in tables:
                    name = sql.Identifier(self.schema, table)
                    connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        except psycopg.Error as error:
            raise StoreError(
                f"could not drop the {len(tables)} tables {self.schema}.tec_check_{self.run}_N "
                f"({type(error).__name__}, SQLSTATE {error.sqlstate or 'none'}): drop them "
                f"by hand"
            ) from None
        return f"dropped the {len(tables)} tables {self.schema}.tec_check_{self.run}_N"


class _RedisScratch(_Scratch):
    """A new key prefix per store."""

    def describe(self) -> str:
        return (
            f"each check gets a new key prefix tec-check-{self.run}-N:, its keys deleted afterwards"
        )

    def _open(self, number: int) -> Any:
        return open_store(self.url, prefix=f"tec-check-{self.run}-{number}:")

    def _remove(self) -> str:
        redis = importlib.import_module("redis")
        pattern = f"tec-check-{self.run}-*"
        removed = 0
        try:
            client = redis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=5)
            try:
                batch: list[bytes] = []
                for key in client.scan_iter(match=pattern, count=1000):
                    batch.append(key)
                    if len(batch) == 500:
                        removed += client.unlink(*batch)
                        batch = []
                if batch:
                    removed += client.unlink(*batch)
            finally:
                client.close()
        except redis.RedisError as error:
            raise StoreError(
                f"could not delete the keys matching {pattern} ({type(error).__name__}): "
                f"delete them by hand"
            ) from None
        return f"deleted {removed} keys matching {pattern}"


def _scratch_for(url: str, schema: str | None) -> _Scratch:
    scheme = _scheme(url)
    if scheme == "sqlite":
        return _SQLiteScratch(url)
    if scheme in ("postgresql", "postgres"):
        return _PostgresScratch(url, "public" if schema is None else schema)
    if scheme in ("redis", "rediss", "unix"):
        return _RedisScratch(url)
    raise _UsageError("a store URL starts with sqlite://, postgresql:// or redis://")


def _testing() -> Any:
    try:
        return importlib.import_module(f"{__package__}.testing")
    except ImportError:
        raise _UsageError(
            "install the testing extra: pip install 'tool-execution-checkpoint[testing]'"
        ) from None


def _run_checks(
    make_store: Callable[[], Any], operable: bool, examples: int | None, hidden: Sequence[str]
) -> int:
    """Run every check on fresh stores from ``make_store``, print one line each; return
    how many failed."""
    testing = _testing()
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
            print(f"FAIL  {name[5:]}: {redact(first, hidden)}", flush=True)
        else:
            print(f"ok    {name[5:]}", flush=True)
        finally:
            suite.teardown_method()
    print(f"{failed} of the checks failed" if failed else "the store passed every check")
    return failed


def _check_factory(factory: str, examples: int | None) -> int:
    _testing()
    processes = importlib.import_module(f"{__package__}.testing.processes")
    try:
        make_store = processes.load_factory(factory)
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        raise _UsageError(f"cannot load the factory: {error}") from None
    probe = make_store()
    operable = hasattr(probe, "list_records")
    close = getattr(probe, "close", None)
    if callable(close):
        close()
    return 5 if _run_checks(make_store, operable, examples, ()) else 0


def _check_url(url: str, examples: int | None, schema: str | None) -> int:
    _testing()
    scratch = _scratch_for(url, schema)
    reached = False
    try:
        probe = scratch.make_store()  # a URL the store cannot parse fails here (exit 2)
        print(scratch.describe(), flush=True)
        # The probe is used first: an unreachable or misconfigured store is exit 4, not a
        # failure of every check.
        probe.get(checkpoint_key(Binding("check-store", "probe", "tool", "1", "sha256:0")))
        reached = True
        failed = _run_checks(scratch.make_store, True, examples, url_secrets(url))
    except BaseException:
        try:
            scratch.remove()
        except StoreError as error:
            if reached:  # a store never reached holds nothing worth a second message
                print(f"tool-checkpoint: {error}", file=sys.stderr)
        raise
    print(scratch.remove())
    return 5 if failed else 0


def _check_store(target: str, examples: int | None, schema: str | None) -> int:
    if schema is not None and "schema" not in _LOCATION_OPTIONS.get(_scheme(target), ()):
        raise _UsageError("--schema applies to a postgresql URL only")
    if "://" in target:
        return _check_url(target, examples, schema)
    return _check_factory(target, examples)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="tool-checkpoint", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    commands = parser.add_subparsers(dest="command", required=True)
    where = argparse.ArgumentParser(add_help=False)
    places = where.add_argument_group("where the records are (default: the store's own)")
    places.add_argument("--schema", help="PostgreSQL: the table's schema (public)")
    places.add_argument("--table", help="PostgreSQL: the table (tec_checkpoint)")
    places.add_argument("--prefix", help="Redis: the key prefix (tec:)")
    run_demo = commands.add_parser(
        "demo", help="the tool runs once, the POST fails, recovery delivers"
    )
    run_demo.add_argument(
        "--path", type=Path, help="the SQLite file (default: a new temporary one)"
    )
    show = commands.add_parser("spec", help="print the transition table")
    show.add_argument("--format", choices=["text", "markdown", "mermaid", "json"], default="text")
    look = commands.add_parser(
        "inspect", help="is a record valid, and what does decide say", parents=[where]
    )
    look.add_argument("file", nargs="?", help="a JSON record file, or - for stdin")
    look.add_argument("--url", help="read the record from this store instead")
    look.add_argument("--key", help="the record's key in that store")
    listing = commands.add_parser(
        "list",
        help="records by status and minimum age",
        description="List records by status and minimum age. Progress goes to stderr: a "
        "line redrawn in place on a terminal; elsewhere a plain line every 10 s at most.",
        parents=[where],
    )
    listing.add_argument("url")
    listing.add_argument("--status", action="append", default=[], choices=[str(s) for s in Status])
    listing.add_argument("--older-than", type=float, default=0.0, metavar="SECONDS")
    listing.add_argument("--format", choices=["table", "json"], default="table")
    pruning = commands.add_parser(
        "prune",
        help="drop old delivered payloads, keep tombstones",
        description="Drop the payloads of delivered records older than the retention, "
        "keeping each record as a tombstone. Progress goes to stderr as for list.",
        parents=[where],
    )
    pruning.add_argument("url")
    pruning.add_argument("--retention", type=float, required=True, metavar="SECONDS")
    vet = commands.add_parser(
        "check-store",
        help="vet a store (a factory or a URL): conformance, harness, stress",
        description=CHECK_STORE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    vet.add_argument("target", metavar="TARGET", help="module:callable, or a store URL")
    vet.add_argument("--examples", type=_positive, help="harness examples (default: the profile's)")
    vet.add_argument("--schema", help="PostgreSQL URL: the schema for the new tables (public)")
    args = parser.parse_args(argv)
    location = {
        name: value
        for name in ("schema", "table", "prefix")
        if args.command in ("inspect", "list", "prune")
        and (value := getattr(args, name)) is not None
    }
    url = args.target if args.command == "check-store" else getattr(args, "url", None)
    hidden = url_secrets(url) if url else ()
    try:
        if args.command == "check-store":
            return _check_store(args.target, args.examples, args.schema)
        if args.command == "demo":
            if args.path is not None:
                return demo(args.path)
            with tempfile.TemporaryDirectory() as directory:
                return demo(Path(directory) / "checkpoints.db")
        if args.command == "inspect":
            return _inspect(args.file, args.url, args.key, location)
        if args.command == "list":
            return _list(args.url, args.status, args.older_than, args.format, location)
        if args.command == "prune":
            return _prune(args.url, args.retention, location)
    except _UsageError as error:
        print(f"tool-checkpoint: {redact(str(error), hidden)}", file=sys.stderr)
        return 2
    except StoreError as error:
        print(f"tool-checkpoint: the store failed: {redact(str(error), hidden)}", file=sys.stderr)
        return 4
    except (CheckpointError, OSError) as error:
        print(f"tool-checkpoint: {redact(str(error), hidden)}", file=sys.stderr)
        return 2
    sys.stdout.write(spec(args.format))
    return 0
