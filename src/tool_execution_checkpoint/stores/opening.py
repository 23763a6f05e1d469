"""open_store(url): the store a URL names, by its scheme, from the store that registered it.

Each store provides its own opener next to its code (``memory.open_url``,
``sqlite.open_url``, ``postgres.open_url``; Redis's ``RedisStore.from_url``), and this
module only maps schemes to them. The table holds import paths, loaded when a URL of that
scheme is opened, so the core never imports psycopg or redis-py: a store of an optional
extra that is not installed is refused, naming the extra to install.

::

    from tool_execution_checkpoint import open_store

    store = open_store("sqlite:///var/lib/agent/checkpoints.db", busy_timeout=5)
    store = open_store("postgresql://app:PASSWORD@db/app", table="calls")
    store = open_store("redis://:PASSWORD@redis:6379/0", prefix="agent:")

Errors name no part of the URL (it may hold a password): the scheme, the option and the
store's own rules, never the value given.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, cast

from ..errors import CheckpointError, ErrorCode
from .core import ClosableStore

__all__ = [
    "StoreScheme",
    "is_store_url",
    "open_store",
    "register_store",
    "store_options",
    "url_scheme",
]

Opener = Callable[..., Any]
"""An opener: ``opener(url, **options)`` returns a store (an operable one, with
``close()``)."""

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_PACKAGE = __package__ or "tool_execution_checkpoint.stores"
_SCRATCH_PACKAGE = f"{_PACKAGE.rpartition('.')[0]}.testing.scratch"


@dataclass(frozen=True, slots=True)
class StoreScheme:
    """What a URL scheme opens.

    Attributes:
        opener: The opener, or its import path ``"package.module:Name.attribute"``,
            imported when a URL of the scheme is first opened.
        options: The keyword options the opener takes beyond the URL, or None for any
            (passed through unchecked). ``create`` among them means the opener honours
            :func:`open_store`'s ``create`` (always passed to it); other openers never
            get it.
        extra: The package extra the opener's module needs (``"postgres"``), named when
            importing it fails; None for the core.
        url_error: The import path of the exception class the opener raises for a URL it
            cannot use; :func:`open_store` raises CheckpointError INVALID_ARGUMENT
            instead, so that no message or context shows the URL. None if there is none.
        scratch: The store's scratch space (a subclass of
            :class:`tool_execution_checkpoint.testing.scratch.ScratchSpace`), or its import
            path: ``scratch(url, **options)`` makes fresh, empty stores inside the URL's
            target (``tool-checkpoint check-store URL``). None if the store has none.
        options_from: When not empty, ``options`` is not used: the options are the
            keyword-only parameters of these import paths' callables, read off their
            signatures when first needed (so each built-in store's options are written
            once, in its opener): the opener, then what an opener taking ``**options``
            passes them to (``postgres.open_url`` to ``PostgresStore``). Any option is
            taken when the last one takes ``**options``.
    """

    opener: str | Opener
    options: frozenset[str] | None = None
    extra: str | None = None
    url_error: str | None = None
    scratch: str | Callable[..., Any] | None = None
    options_from: tuple[str, ...] = ()


def _builtin(
    path: str,
    extra: str | None = None,
    url_error: str | None = None,
    scratch: str | None = None,
    passes_options_to: str | None = None,
) -> StoreScheme:
    opener = f"{_PACKAGE}.{path}"
    return StoreScheme(
        opener,
        None,
        extra,
        url_error and f"{_PACKAGE}.{url_error}",
        scratch and f"{_SCRATCH_PACKAGE}.{scratch}",
        (opener, f"{_PACKAGE}.{passes_options_to}") if passes_options_to else (opener,),
    )


_SCHEMES: dict[str, StoreScheme] = {
    "memory": _builtin("memory:open_url"),
    "sqlite": _builtin("sqlite:open_url", scratch="sqlite:SQLiteScratch"),
    **{
        scheme: _builtin(
            "postgres:open_url",
            "postgres",
            scratch="postgres:PostgresScratch",
            passes_options_to="postgres:PostgresStore",
        )
        for scheme in ("postgresql", "postgres")
    },
    **{
        scheme: _builtin(
            "redis:RedisStore.from_url",
            "redis",
            "redis:RedisConfigurationError",
            "redis:RedisScratch",
        )
        for scheme in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")
    },
}
_LOCK = threading.Lock()


def _refuse(field: str, detail: str) -> CheckpointError:
    return CheckpointError(ErrorCode.INVALID_ARGUMENT, detail, field=field)


def register_store(
    scheme: str,
    opener: str | Opener,
    *,
    options: Collection[str] | None = None,
    extra: str | None = None,
    url_error: str | None = None,
    scratch: str | Callable[..., Any] | None = None,
) -> None:
    """Make :func:`open_store` open URLs of ``scheme`` with ``opener``, and
    :func:`~tool_execution_checkpoint.testing.scratch.scratch_space` make scratch stores
    with ``scratch`` (see :class:`StoreScheme` for the arguments); a scheme registered
    before is replaced.

    Raises:
        CheckpointError: INVALID_ARGUMENT for a scheme that is not a URL scheme (a letter,
            then letters, digits, ``+``, ``-`` or ``.``), or an opener that is neither
            callable nor a ``module:attribute`` path.
    """
    if type(scheme) is not str or _SCHEME.fullmatch(f"{scheme}:") is None:
        raise _refuse("scheme", "must be a URL scheme: a letter, then letters, digits, +, - or .")
    if not callable(opener) and not (isinstance(opener, str) and ":" in opener):
        raise _refuse("opener", "must be callable or a module:attribute import path")
    chosen = None if options is None else frozenset(options)
    with _LOCK:
        _SCHEMES[scheme.lower()] = StoreScheme(opener, chosen, extra, url_error, scratch)


def url_scheme(url: object) -> str | None:
    """The scheme a URL starts with, in lower case (``"sqlite"`` for
    ``sqlite:relative/path``), or None when it starts with none."""
    if type(url) is not str:
        return None
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else None


def _scheme_of(url: object) -> StoreScheme:
    scheme = url_scheme(url)
    with _LOCK:
        found = _SCHEMES.get(scheme) if scheme is not None else None
        known = ", ".join(sorted(_SCHEMES))
    if found is None:
        raise _refuse(
            "url",
            "names no registered store (not shown: it may hold a password): write "
            f"sqlite:///absolute/path, sqlite:relative/path, postgresql://... or "
            f"redis://... (the schemes known: {known})",
        )
    return found


def is_store_url(url: object) -> bool:
    """Whether ``url`` starts with a scheme a store registered."""
    scheme = url_scheme(url)
    with _LOCK:
        return scheme is not None and scheme in _SCHEMES


def store_options(url: str) -> frozenset[str] | None:
    """The keyword options the store that ``url`` names takes beyond the URL, or None
    when its opener takes any.

    Raises:
        CheckpointError: INVALID_ARGUMENT when no store registered the URL's scheme, or
            (for a built-in store, whose options are read off its opener) when the
            store's module cannot be imported, naming the extra to install.
    """
    return _options(_scheme_of(url))


def _options(entry: StoreScheme) -> frozenset[str] | None:
    """``entry``'s options: its ``options``, or those read off ``options_from``."""
    if not entry.options_from:
        return entry.options
    return _signature_options(entry.options_from, entry.extra)


@functools.cache
def _signature_options(paths: tuple[str, ...], extra: str | None) -> frozenset[str] | None:
    """The keyword-only parameters of the callables at ``paths``; None (any) when the
    last takes ``**options``. A module that cannot be imported is refused by
    :func:`_load` (and nothing is cached)."""
    names: set[str] = set()
    takes_any = False
    for path in paths:
        parameters = inspect.signature(_load(path, extra)).parameters.values()
        names.update(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    return None if takes_any else frozenset(names)


def _load(path: str, extra: str | None) -> Any:
    """The object an import path names; CheckpointError INVALID_ARGUMENT (outside the
    ``except``, so no context) when its module cannot be imported."""
    module_name, _, attribute = path.partition(":")
    missing: str | None = None
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as error:
        missing = error.name or module_name
    if missing is not None:
        install = (
            f": install the {extra} extra: pip install 'tool-execution-checkpoint[{extra}]'"
            if extra
            else ""
        )
        raise _refuse("url", f"names a store whose module cannot be imported{install}")
    for name in attribute.split("."):
        found = getattr(found, name)
    return found


def open_store(url: str, *, create: bool = True, **options: Any) -> ClosableStore:
    """Open the store a URL names, by its scheme, with the opener its store registered.

    The built-in schemes: ``memory:`` (a new, empty :class:`~.memory.MemoryStore`),
    ``sqlite:///absolute/path`` or ``sqlite:relative/path`` (``?busy_timeout=SECONDS``;
    :func:`~.sqlite.open_url`), ``postgresql://`` and ``postgres://``
    (:func:`~.postgres.open_url`; the ``postgres`` extra), ``redis://``, ``rediss://``,
    ``unix://``, and ``redis+cluster://`` or ``rediss+cluster://`` for a Redis Cluster
    (``RedisStore.from_url``; the ``redis`` extra). More with
    :func:`register_store`.

    Args:
        url: The store's URL. It is never shown in a message (it may hold a password).
        create: With False, no new storage is made where opening or first use would
            make it: a SQLite file that does not exist is refused (a StoreError), never
            created; on PostgreSQL it is ``create_table=False``, so a missing table is a
            StoreError at the first operation, never created. Stores that make nothing
            ignore it (Redis and memory).
        options: The store's own keyword options, for example ``busy_timeout`` (SQLite),
            ``schema`` and ``table`` (PostgreSQL), ``prefix`` (Redis).

    Returns:
        The store, which owns what it opened: close it with ``close()``.

    Raises:
        CheckpointError: INVALID_ARGUMENT, naming no part of the URL, for a URL whose
            scheme no store registered, an option the URL's store does not take, a store
            whose optional extra is not installed, or a URL the store cannot use.
        StoreError: The store's own refusal to open (for SQLite, a missing directory or
            file, or a file that is not a store); stores that connect lazily fail at the
            first operation instead.
    """
    entry = _scheme_of(url)
    known = _options(entry)
    if known is not None:
        for name in options:
            if name not in known:
                takes = ", ".join(sorted(known - {"create"})) or "none"
                raise _refuse(name, f"is not an option of this URL's store (it takes: {takes})")
    if known is not None and "create" in known:
        options["create"] = create
    opener = entry.opener if callable(entry.opener) else _load(entry.opener, entry.extra)
    if entry.url_error is None:
        return cast(ClosableStore, opener(url, **options))
    refused = _load(entry.url_error, entry.extra)
    try:
        return cast(ClosableStore, opener(url, **options))
    except refused:  # its message or context may quote the URL: not kept as a context
        pass
    raise _refuse("url", "is not a URL this store can use (not shown: it may hold a password)")
