"""What every command shares: the exit codes, the usage error, the passwords a URL
carries and their redaction, opening the store a URL names (never creating one), and
reading a file or stdin within a bound."""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ..stores.opening import is_store_url, store_options, url_scheme
from ..stores.opening import open_store as open_url_store
from ..table import TABLE

__all__ = [
    "EXIT_MEANINGS",
    "MAX_INPUT_BYTES",
    "UNREADABLE",
    "Exit",
    "UsageError",
    "open_store",
    "read_input",
    "redact",
    "url_secrets",
]


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


class UsageError(Exception):
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
            raise UsageError(f"{_NOT_A_URL} (for a SQLite file: sqlite:PATH)")
        raise UsageError(_NOT_A_URL)
    takes = store_options(url)  # CheckpointError for a store whose extra is missing
    for name in location:
        if takes is not None and name not in takes:
            flags = ", ".join(f"--{option}" for option in _LOCATION if option in takes)
            hint = f" (it takes {flags})" if flags else ""
            raise UsageError(f"--{name} does not apply to a {url_scheme(url)} URL{hint}")
    return open_url_store(url, create=False, **location)


_NOT_A_URL = (
    "not a store URL: write sqlite:///absolute/path, sqlite:relative/path, "
    "postgresql://... or redis://..."
)


UNREADABLE: Any = object()


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


def read_input(what: str, source: str | None) -> bytes:
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
            raise UsageError(f"{what} is not a path this system can open")
        with Path(str(source)).open("rb") as file:
            data = file.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise UsageError(f"{what} holds more than {MAX_INPUT_BYTES} bytes")
    return data
