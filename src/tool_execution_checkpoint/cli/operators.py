"""The commands that write or vet: ``reconcile`` (settle a stuck record by
compare-and-swap, see :mod:`tool_execution_checkpoint.operations`), ``prune`` (drop old
delivered payloads) and ``check-store`` (parsed here, run by
:mod:`tool_execution_checkpoint.testing.check_store`)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..errors import ErrorCode
from ..operations import (
    Reconciliation,
    complete_stuck_execution,
    confirm_stuck_delivery,
    mark_stuck_uncertain,
    prune_delivered,
    release_stuck_delivery,
)
from ..progress import Progress
from ..records import Result
from ..stores.core import check_key
from ..stores.opening import is_store_url, store_options
from ..validation import check_identifier, check_reason
from .common import UNREADABLE, Exit, UsageError, open_store, read_input
from .reading import record_json, record_text

__all__ = ["check_store", "prune", "reconcile"]

_PACKAGE = (__package__ or "tool_execution_checkpoint.cli").rpartition(".")[0]


def _read_found(source: str) -> object:
    """The JSON value in the file ``source`` (``-`` for stdin), for ``--complete``.

    A file that is not JSON in UTF-8 is a usage error raised outside the ``except``: the
    refusal's context would otherwise hold the file's text (a JSONDecodeError keeps all
    of it in ``.doc``, a UnicodeDecodeError the bytes in ``.object``), the payload."""
    data = read_input("--complete's file", source)
    found: object = UNREADABLE
    try:
        found = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        found = UNREADABLE
    if found is UNREADABLE:
        raise UsageError("--complete takes a file of JSON in UTF-8 (- for stdin)")
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


def reconcile(args: argparse.Namespace, location: dict[str, str]) -> int:
    """``reconcile``: check every argument, then take the one reconciliation asked for,
    print the transition and the record written (or that would be); return the exit
    code."""
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
        shown = record_json(key, done.after, 0, payload=False)
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
    sys.stdout.write(record_text(key, after, 0, payload=False))
    return Exit.OK


def prune(url: str, retention: float, location: dict[str, str]) -> int:
    """``prune``: drop the payloads of the delivered records last written more than
    ``retention`` seconds ago on the store's clock, keeping tombstones; print how many,
    and the keys of records that could not be read; return the exit code."""
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


def _testing(module: str) -> Any:
    """The module ``testing.<module>``; a usage error when the testing extra is missing."""
    try:
        importlib.import_module(f"{_PACKAGE}.testing")
    except ImportError:
        raise UsageError(
            "install the testing extra: pip install 'tool-execution-checkpoint[testing]'"
        ) from None
    return importlib.import_module(f"{_PACKAGE}.testing.{module}")


def _takes(target: str) -> frozenset[str]:
    """The options the store a URL names takes (none for a factory or an unknown URL)."""
    return (store_options(target) if is_store_url(target) else None) or frozenset()


def check_store(
    target: str, examples: int | None, schema: str | None, storm: bool, hidden: Sequence[str]
) -> int:
    """``check-store``: run :func:`~tool_execution_checkpoint.testing.check_store.check_store`
    on ``target``; return :attr:`Exit.CHECK_FAILED` if a check failed. A usage error for
    ``--schema`` on a store that takes none, a missing testing extra or a factory that
    cannot be loaded."""
    if schema is not None and "schema" not in _takes(target):
        raise UsageError("--schema applies to a postgresql URL only")
    runner = _testing("check_store")
    try:
        failed = runner.check_store(
            target, examples=examples, schema=schema, storm=storm, hidden=hidden
        )
    except runner.BadTarget as error:
        raise UsageError(str(error)) from None
    return Exit.CHECK_FAILED if failed else Exit.OK
