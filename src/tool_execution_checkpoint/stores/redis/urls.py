"""The URLs a Redis store is opened with, and where a store says its server is."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from redis.connection import parse_url

from ...errors import CheckpointError, ErrorCode
from .errors import RedisConfigurationError, invalid_url

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_SOCKET_TIMEOUT",
    "address",
    "check_url",
    "cluster_seed",
    "plain_cluster_url",
]

DEFAULT_SOCKET_TIMEOUT = 5.0
"""Seconds a store built from a URL waits for a reply before giving up."""
DEFAULT_CONNECT_TIMEOUT = 2.0
"""Seconds a store built from a URL waits for a connection before giving up."""

_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def check_url(value: object) -> str:
    """``value``, or CheckpointError INVALID_ARGUMENT when it is not a string."""
    if type(value) is not str:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "must be a redis-py client or a Redis URL string",
            field="client_or_url",
        )
    return value


def plain_cluster_url(url: str) -> str | None:
    """The ``redis://`` (``rediss://``) URL of a ``redis+cluster://``
    (``rediss+cluster://``) URL, which redis-py's cluster clients take; None for any
    other URL."""
    scheme, separator, rest = url.partition("://")
    plain = _CLUSTER_SCHEMES.get(scheme.lower()) if separator else None
    return None if plain is None else f"{plain}://{rest}"


def cluster_seed(url: str) -> str:
    """``host:port`` of the node a cluster URL names, after checking the URL as redis-py
    will (database 0 only: a cluster has no other).

    Raises:
        RedisConfigurationError: for a URL redis-py cannot read, or a database other
            than 0 (the URL is not shown).
    """
    options: dict[str, Any] | None
    try:
        options = dict(cast(Callable[[str], dict[str, Any]], parse_url)(url))
    except (ValueError, TypeError, KeyError):  # may quote the URL: not kept as a context
        options = None
    if options is None or "host" not in options:
        raise invalid_url()
    if options.get("db", 0) != 0:
        raise RedisConfigurationError(
            "a Redis Cluster has only database 0: drop the database from the redis+cluster:// URL"
        )
    return f"{options['host']}:{options.get('port', 6379)}"


def address(connection_kwargs: Mapping[str, Any]) -> str:
    """Where a pool connects: host:port/db or the unix socket path (no credentials)."""
    database = connection_kwargs.get("db", 0)
    path = connection_kwargs.get("path")
    if path:
        return f"unix:{path} (db {database})"
    host = connection_kwargs.get("host", "localhost")
    port = connection_kwargs.get("port", 6379)
    return f"{host}:{port}/{database}"
