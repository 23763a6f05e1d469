"""The command line: ``tool-checkpoint`` (or ``python -m tool_execution_checkpoint``):
``demo``, ``spec``, ``inspect``, ``show``, ``list``, ``reconcile``, ``prune`` and
``check-store`` (docs/operators.md says what each is for and where its code lives).

:func:`main` returns one of :class:`Exit`'s codes. A command never creates a store; no
message shows a URL's password, and none shows a payload unless ``show --payload`` asks
for it.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from ..errors import CheckpointError, ErrorCode
from ..operations import ClaimTooYoung, NoRecord, ReconciliationRefused, RevisionMoved
from ..stores.core import StoreError
from .common import EXIT_MEANINGS as EXIT_MEANINGS
from .common import MAX_INPUT_BYTES as MAX_INPUT_BYTES
from .common import Exit, UsageError
from .common import open_store as open_store
from .common import redact as redact
from .common import url_secrets as url_secrets
from .demo import demo as run_demo
from .operators import check_store, prune, reconcile
from .parser import MAX_DURATION_SECONDS as MAX_DURATION_SECONDS
from .parser import build_parser
from .parser import duration as duration
from .reading import format_age as format_age
from .reading import inspect_record, list_records, show_record, spec

__all__ = ["Exit", "main"]


_REFUSALS: Final[Mapping[type[ReconciliationRefused], tuple[str, Exit]]] = {
    NoRecord: ("", Exit.NO_RECORD),
    RevisionMoved: ("; nothing was written", Exit.REVISION_MOVED),
    ClaimTooYoung: ("; nothing was written", Exit.TOO_YOUNG),
}
"""What the message adds after a refused reconciliation's own text, and the exit code."""


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


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's entry point; returns the exit code (see :class:`Exit`)."""
    args = build_parser().parse_args(argv)
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
            return check_store(args.target, args.examples, args.schema, args.storm, hidden)
        if args.command == "demo":
            if args.path is not None:
                return run_demo(args.path)
            with tempfile.TemporaryDirectory() as directory:
                return run_demo(Path(directory) / "checkpoints.db", temporary=True)
        if args.command == "inspect":
            return inspect_record(args.file, args.url, args.key, location)
        if args.command == "show":
            return show_record(args.url, args.key, args.payload, args.format, location)
        if args.command == "list":
            return list_records(args.url, args.status, args.older_than, args.format, location)
        if args.command == "reconcile":
            return reconcile(args, location)
        if args.command == "prune":
            return prune(args.url, args.retention, location)
    except UsageError as error:
        print(f"tool-checkpoint: {redact(str(error), hidden)}", file=sys.stderr)
        return Exit.USAGE
    except StoreError as error:
        print(f"tool-checkpoint: the store failed: {redact(str(error), hidden)}", file=sys.stderr)
        return Exit.STORE_FAILED
    except (NoRecord, RevisionMoved, ClaimTooYoung) as error:
        after, code = _REFUSALS[type(error)]
        print(f"tool-checkpoint: {error}{after}", file=sys.stderr)
        return code
    except CheckpointError as error:
        print(f"tool-checkpoint: {redact(str(error), hidden)}", file=sys.stderr)
        return _exit_for(error)
    except OSError as error:  # its text names the file: the reason alone is shown
        reason = error.strerror or type(error).__name__
        print(f"tool-checkpoint: a file could not be read: {reason}", file=sys.stderr)
        return Exit.USAGE
    sys.stdout.write(spec(args.format))
    return Exit.OK
