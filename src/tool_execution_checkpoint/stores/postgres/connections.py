"""Where and how the store connects: the target parsed from a URL, the keyword arguments
of every connection it makes, and the local checks of a pooled connection. Nothing here
sends anything."""

from __future__ import annotations

import math
import selectors
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ...errors import CheckpointError, ErrorCode
from .sql import APPLICATION_NAME

__all__ = ["Target", "alive", "connect_kwargs", "idle"]


@dataclass(frozen=True)
class Target:
    """Where to connect, parsed once; ``describe`` names it without the password."""

    conninfo: str
    fields: Mapping[str, str]

    @classmethod
    def parse(cls, conninfo: object) -> Target:
        """The target of a PostgreSQL URL or libpq key=value string.

        Raises:
            CheckpointError: INVALID_ARGUMENT (field ``conninfo_or_pool``) for anything
                else, naming no part of it and with no context (libpq's message would
                quote it, password included).
        """
        if type(conninfo) is not str:
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "must be a PostgreSQL URL or key=value string, or a psycopg_pool pool",
                field="conninfo_or_pool",
            )
        try:
            fields: dict[str, Any] | None = conninfo_to_dict(conninfo)
        except psycopg.Error:  # its message quotes the string, password included
            fields = None
        if fields is None:  # raised outside the except: no context holds the string
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "is not a valid PostgreSQL URL or key=value string (not shown: it may hold "
                "a password)",
                field="conninfo_or_pool",
            )
        return cls(conninfo, {key: str(value) for key, value in fields.items()})

    def describe(self) -> str:
        """The host, port, database and role, for messages: never the password."""
        host = self.fields.get("host") or self.fields.get("hostaddr") or "the default host"
        port = self.fields.get("port") or "5432"
        database = self.fields.get("dbname") or "the default database"
        user = self.fields.get("user") or "the default role"
        return f"PostgreSQL at {host}:{port} (database {database}, role {user})"

    def password(self) -> str | None:
        """The password, to blank it out of libpq's messages; None when there is none."""
        return self.fields.get("password") or None


def connect_kwargs(target: Target, timeout: float, prepare_threshold: int | None) -> dict[str, Any]:
    """The keyword arguments of each connection the store makes to ``target``:
    autocommit, UTF8, psycopg's ``prepare_threshold``, and (unless the URL sets them)
    libpq's ``connect_timeout`` and the store's ``application_name``."""
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "client_encoding": "UTF8",
        "prepare_threshold": prepare_threshold,
    }
    if "connect_timeout" not in target.fields:
        # libpq counts whole seconds and treats anything below 2 as 2.
        kwargs["connect_timeout"] = str(max(2, math.ceil(timeout)))
    if "application_name" not in target.fields:
        kwargs["application_name"] = APPLICATION_NAME
    return kwargs


def alive(connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle pooled connection still looks usable, checked locally: nothing may
    be readable on its socket (a terminated backend leaves an error message and EOF)."""
    if connection.closed or connection.broken:
        return False
    try:
        # A selector, not select.select: that refuses descriptors from 1024 up.
        with selectors.DefaultSelector() as selector:
            selector.register(connection.pgconn.socket, selectors.EVENT_READ)
            readable = selector.select(0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable


def idle(connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether ``connection`` is open and outside a transaction (so its autocommit may be
    switched back)."""
    return (
        not connection.closed
        and connection.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    )
