"""Where an SQLite store's file is: the checks of a database path, of a busy timeout, and
the one parser of ``sqlite:`` URLs."""

from __future__ import annotations

import math
import os
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from ...errors import CheckpointError, ErrorCode
from .errors import SQLiteConfigurationError

__all__ = ["MAX_BUSY_TIMEOUT", "check_busy_timeout", "database_path", "url_location"]

MAX_BUSY_TIMEOUT = 3_600.0
"""The longest busy timeout a store takes, in seconds."""


def check_busy_timeout(value: object) -> float:
    """Seconds from 0 to 3,600 (NaN and infinities fail the comparison).

    Raises:
        CheckpointError: INVALID_ARGUMENT (field ``busy_timeout``) for anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        value = math.nan
    if not 0 <= value <= MAX_BUSY_TIMEOUT:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            f"must be a number of seconds from 0 to {MAX_BUSY_TIMEOUT:g}",
            field="busy_timeout",
            limit=int(MAX_BUSY_TIMEOUT),
        )
    return float(value)


def _unencodable(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (no file system path can)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def database_path(path: object) -> Path:
    """The absolute path of the database file, refusing what names no durable file.

    Raises:
        SQLiteConfigurationError: for a path that is not text, holds a NUL or a lone
            surrogate, names an in-memory database or a directory, or lies in a
            directory that does not exist.
    """
    if not isinstance(path, str | os.PathLike):
        raise SQLiteConfigurationError("the database path must be a str or os.PathLike")
    raw = os.fspath(path)
    if not isinstance(raw, str):
        raise SQLiteConfigurationError("the database path must be text, not bytes")
    if "\x00" in raw or _unencodable(raw):
        raise SQLiteConfigurationError(
            "the database path holds a NUL character or a lone surrogate"
        )
    if raw in ("", ":memory:") or raw.startswith("file::memory:"):
        raise SQLiteConfigurationError(
            "an in-memory SQLite database is neither durable nor shared between"
            " connections and processes: give the path of a database file, or use"
            " MemoryStore for tests"
        )
    absolute = Path(os.path.abspath(raw))
    if absolute.is_dir():
        raise SQLiteConfigurationError(
            f"cannot open {absolute}: it is a directory; give the path of a database file inside it"
        )
    if not absolute.parent.is_dir():
        raise SQLiteConfigurationError(
            f"cannot open {absolute}: the directory {absolute.parent} does not exist;"
            " create it first (the store creates only the file)"
        )
    return absolute


def _url_refusal(detail: str) -> CheckpointError:
    return CheckpointError(ErrorCode.INVALID_ARGUMENT, detail, field="url")


def url_location(url: str) -> tuple[Path, float | None]:
    """The absolute path of the file a sqlite URL names, and its ``busy_timeout``: the
    one parser of sqlite URLs, behind :meth:`~.store.SQLiteStore.from_url`,
    :func:`~.store.open_url` (so :func:`~tool_execution_checkpoint.open_store`) and the
    command line.

    The URL is ``sqlite:///absolute/path`` or ``sqlite:relative/path`` (relative to the
    working directory), percent-decoded, optionally with ``?busy_timeout=SECONDS``.
    Nothing is opened.

    Raises:
        CheckpointError: INVALID_ARGUMENT, naming no part of the URL, for a URL with a
            host (``sqlite://name``), a fragment, no path or ``:memory:``, a NUL in the
            path, a query other than one ``busy_timeout``, or a busy_timeout that is not
            a number.
    """
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme.lower() != "sqlite":
        raise _url_refusal("a sqlite URL starts with sqlite: (sqlite:///absolute/path)")
    path = unquote(parts.path)
    if parts.netloc:
        raise _url_refusal(
            "a sqlite URL names no host: write sqlite:///absolute/path, or "
            "sqlite:relative/path for a file under the working directory"
        )
    if "\x00" in path:
        raise _url_refusal("a sqlite URL's path holds a NUL character (%00)")
    if path.strip("/") == ":memory:":
        raise _url_refusal(
            "an in-memory SQLite database is neither durable nor shared between "
            "connections and processes: name a database file, or use MemoryStore "
            "(memory:) for tests"
        )
    if parts.fragment or path.strip("/") == "":
        raise _url_refusal(
            "a sqlite URL names a local file: sqlite:///absolute/path or "
            "sqlite:relative/path (no fragment)"
        )
    query = parse_qsl(parts.query, keep_blank_values=True)
    if [name for name, _ in query] not in ([], ["busy_timeout"]):
        raise _url_refusal("a sqlite URL accepts one query parameter, busy_timeout=SECONDS")
    seconds: float | None = None
    for _, value in query:
        try:
            seconds = float(value)
        except ValueError:  # its message quotes the URL's text: not kept as a context
            seconds = math.nan
    if seconds is not None and math.isnan(seconds):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT, "must be a number of seconds", field="busy_timeout"
        )
    return Path(path).absolute(), seconds
