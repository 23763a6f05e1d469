"""The command line's arguments: one argparse parser whose usage errors never show a
value given, its help texts, and the duration and count arguments."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import NoReturn

from ..operations import DEFAULT_MIN_AGE_US
from ..table import TABLE, Status
from .common import EXIT_MEANINGS, Exit

__all__ = ["MAX_DURATION_SECONDS", "build_parser", "duration"]


DESCRIPTION = """\
Run an AI agent's tool at most once and deliver its exact result: the demo, the
transition table, and an operator's tools to read, list, settle and prune the records
of a store.

store URLs: sqlite:///absolute/path or sqlite:relative/path (an existing file; no
command creates a store), postgresql://... (an existing table: --schema, --table),
redis://... or redis+cluster://... (the postgres and redis extras).
No message shows a URL's password; no command shows a payload unless show --payload.
"""


EXIT_CODES_HELP = "exit codes:\n" + "\n".join(
    f"  {code.value}  {meaning}" for code, meaning in EXIT_MEANINGS.items()
)


RECONCILE_HELP = """\
Settle a stuck record through the transition table, on behalf of the dead claim's owner
(its stored attempt id or delivery id), by compare-and-swap from REVISION, the revision
you saw in show or list: if the record moved, nothing is written (exit 7). Give one
action:

  --complete FILE          executing or uncertain -> completed, with the tool's result
                           found in its own system: a file of JSON (- for stdin). The
                           next delivery sends it; the tool never runs again. For a
                           tool guarded by @checkpointed: {"returned": RESULT}.
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


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command and its arguments."""
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
