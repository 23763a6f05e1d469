"""The Redis stores' errors, and the one translation of redis-py's and the OS's failures
into them, by when the failure happened: before a command was sent (nothing applied),
or after a write was sent (its outcome unknown).

No message holds a payload, a key, a URL or a password: each says where the server is
(host, port and database, or the socket's path) and what to fix.
"""

from __future__ import annotations

import os

from redis.exceptions import (
    AskError,
    AuthenticationError,
    BusyLoadingError,
    ClusterCrossSlotError,
    ClusterDownError,
    MaxConnectionsError,
    MovedError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .. import core

__all__ = [
    "RedisAuthenticationError",
    "RedisCommandError",
    "RedisConfigurationError",
    "RedisDurabilityError",
    "RedisDurabilityWarning",
    "RedisOutcomeUnknownError",
    "RedisReplyError",
    "RedisStoreError",
    "RedisUnavailableError",
]


class RedisStoreError(core.StoreError):
    """A Redis store operation failed: the base of the store's errors, each of which is
    also in one category of :class:`~tool_execution_checkpoint.stores.StoreError`."""


class RedisUnavailableError(RedisStoreError, core.StoreUnavailableError):
    """The server could not be reached, did not answer in time, or is still loading its
    data. Raised before a command was sent, or for a read: no write was applied by the
    call that raised it."""


class RedisAuthenticationError(RedisStoreError, core.StoreConfigurationError):
    """The server refused the credentials (wrong or missing password or user name). The
    message never shows the password."""


class RedisConfigurationError(RedisStoreError, core.StoreConfigurationError):
    """The store is configured wrongly: a URL that is not a Redis URL, or a server whose
    settings break the storage contract (see :class:`RedisDurabilityError`)."""


class RedisDurabilityError(RedisConfigurationError):
    """The server's persistence settings do not make an acknowledged write survive a
    crash (raised by ``check_durability`` under the ``"raise"`` policy)."""


class RedisDurabilityWarning(UserWarning):
    """The server's persistence settings are weak (``check_durability(on_weak="warn")``)."""


class RedisCommandError(RedisStoreError, core.StoreNotAppliedError):
    """The server refused a command with an error, before it changed anything (out of
    memory, read-only replica, a foreign value under the store's prefix, a cluster
    redirection...). The scripts declare themselves with a shebang, so Redis refuses
    them before they run when it is out of memory, read-only or cannot persist, and
    they check every key they write before writing any. A write refused with an error
    that may come from inside a script after it wrote (a missing ACL permission for
    one of its commands, ``NOPERM``, or an unknown error) is
    :class:`RedisOutcomeUnknownError` instead; a read refused with it is this error.
    ``code`` is the server's error code, for example ``"OOM"``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class RedisOutcomeUnknownError(RedisStoreError, core.OutcomeUnknownError):
    """A write was sent and may or may not have run: the connection failed or timed out
    before its reply, the reply was not one the store understands, or the server
    refused it with an error that may come from inside the script (``code``, else
    None). Read the record back: it is at the old revision (not applied) or is exactly
    the record that was written (applied), never anything in between."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class RedisReplyError(RedisStoreError, core.StoreNotAppliedError):
    """A read got a reply the store does not understand (for example from a proxy in
    front of Redis, or a key under the store's prefix that is not UTF-8). Nothing was
    written; a write that gets such a reply is :class:`RedisOutcomeUnknownError`."""


_COMMAND_HINTS = {
    "OOM": "the server reached maxmemory; raise maxmemory (and keep maxmemory-policy "
    "noeviction: an evicted record would be re-created and its tool run again)",
    "READONLY": "the server is a read-only replica; point the store at the primary",
    "NOPERM": "the Redis user lacks a permission the store needs (EVALSHA, SCRIPT LOAD, "
    "HGET, and CONFIG GET for check_durability); grant it with ACL SETUSER",
    "WRONGTYPE": "a key under the store's prefix holds a value the store did not write; "
    "give every store a prefix of its own",
    "MISCONF": "the server cannot persist (a failing AOF write or background save); fix "
    "the server's disk or persistence settings",
    "BUSY": "a long-running script blocks the server; wait, or end it with SCRIPT KILL",
    "NOSCRIPT": "the server dropped the store's script again right after loading it",
    "NOREPLICAS": "the server's min-replicas-to-write is not met; check the replicas",
    "CROSSSLOT": "the server is a Redis Cluster node: open the store with a "
    "redis+cluster:// URL or a redis.cluster.RedisCluster client",
    "MOVED": "the server is a Redis Cluster node: open the store with a "
    "redis+cluster:// URL or a redis.cluster.RedisCluster client",
    "ASK": "the server is a Redis Cluster node: open the store with a "
    "redis+cluster:// URL or a redis.cluster.RedisCluster client",
    "CLUSTERDOWN": "the Redis Cluster is down (a slot has no reachable master); wait for "
    "it to recover, the write was not applied",
    "TRYAGAIN": "the Redis Cluster is moving the record's slot; retry shortly, the write "
    "was not applied",
}

_REFUSED_BEFORE_WRITING = frozenset(_COMMAND_HINTS) - {"NOPERM"}
"""The error codes with which Redis refuses a write script before it writes anything:
before it runs (the shebang's checks, a busy server, an unloaded script, a cluster
redirection) or at the script's own key checks (WRONGTYPE). A NOPERM may come from a
command inside the script, after an earlier one wrote."""

_CLUSTER_CODES: tuple[tuple[type[ResponseError], str], ...] = (
    (MovedError, "MOVED"),  # before AskError: redis-py's MovedError is an AskError
    (AskError, "ASK"),
    (TryAgainError, "TRYAGAIN"),
    (ClusterDownError, "CLUSTERDOWN"),
    (ClusterCrossSlotError, "CROSSSLOT"),
)


def error_code(error: ResponseError) -> str:
    """The server's error code of a refusal (``"OOM"``, ``"MOVED"``...; ``"ERR"`` when
    it gave none)."""
    for kind, name in _CLUSTER_CODES:
        if isinstance(error, kind):
            return name
    code = getattr(error, "status_code", None)
    if isinstance(code, str) and code:
        return code
    first = str(error).split(" ", 1)[0]
    return first if first.isalpha() and first.isupper() else "ERR"


def _within(timeout: object) -> str:
    return f"within {timeout} s" if isinstance(timeout, int | float) else "in time"


def _os_reason(error: BaseException, otherwise: str) -> str:
    """A short reason from the OS error behind ``error``, else ``otherwise`` (never the
    library's message, never a payload)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            return os.strerror(current.errno).lower()
        current = current.__cause__ or current.__context__
    return otherwise


def connect_failure(error: BaseException, where: str, timeout: object) -> core.StoreError | None:
    """The store error for a failure while getting a connected connection (nothing was
    sent), or None when ``error`` is not a Redis or OS error."""
    if isinstance(error, AuthenticationError):
        return RedisAuthenticationError(
            f"the Redis server at {where} refused the credentials: check the user name "
            "and password in the URL or client (the password is not shown)"
        )
    if isinstance(error, BusyLoadingError):
        return RedisUnavailableError(
            f"the Redis server at {where} is still loading its data set: retry shortly"
        )
    if isinstance(error, MaxConnectionsError):
        return RedisUnavailableError(
            f"the connection pool for the Redis server at {where} is exhausted: raise the "
            "client's max_connections or use fewer threads"
        )
    if isinstance(error, RedisTimeoutError):
        return RedisUnavailableError(
            f"the Redis server at {where} did not answer {_within(timeout)} while "
            "connecting: check the host, port and network, and that the server is not "
            "blocked"
        )
    if isinstance(error, RedisConnectionError | OSError):
        return RedisUnavailableError(
            f"cannot connect to the Redis server at {where} "
            f"({_os_reason(error, 'the connection failed')}): check "
            "that redis-server runs there and that the URL's host and port are right"
        )
    if isinstance(error, ResponseError):
        return _command_failure(error, where)
    if isinstance(error, RedisError):
        return RedisUnavailableError(
            f"cannot use the Redis server at {where} ({type(error).__name__})"
        )
    return None


def _command_failure(error: ResponseError, where: str) -> RedisCommandError:
    code = error_code(error)
    hint = _COMMAND_HINTS.get(code, "see the server's log")
    return RedisCommandError(
        f"the Redis server at {where} refused the store's command ({code}): {hint}", code
    )


def exchange_failure(
    error: BaseException, write: bool, where: str, timeout: object
) -> core.StoreError | None:
    """The store error for a failure after a command (a ``write`` or a read) may have
    been sent, or None when ``error`` is not a Redis or OS error."""
    if isinstance(error, AuthenticationError | BusyLoadingError):
        return connect_failure(error, where, timeout)  # the server refused the command
    if isinstance(error, ResponseError):
        refusal = _command_failure(error, where)
        if write and refusal.code not in _REFUSED_BEFORE_WRITING:
            return RedisOutcomeUnknownError(
                f"{refusal}; the script may have stopped after writing: it may or may not "
                "have been applied, read the record back and decide again",
                refusal.code,
            )
        return refusal
    if not isinstance(error, RedisError | OSError):
        return None
    what = (
        f"no answer {_within(timeout)}"
        if isinstance(error, RedisTimeoutError)
        else _os_reason(error, "the connection was lost")
        if isinstance(error, RedisConnectionError | OSError)
        else type(error).__name__
    )
    if write:
        return RedisOutcomeUnknownError(
            f"the connection to the Redis server at {where} failed after a write was sent "
            f"({what}): it may or may not have been applied; read the record back and "
            "decide again"
        )
    return RedisUnavailableError(
        f"the connection to the Redis server at {where} failed during a read ({what}): "
        "retry the read"
    )


def unknown_reply() -> RedisReplyError:
    """The error for a read whose reply the store does not understand."""
    return RedisReplyError("the Redis server gave a reply the store does not understand")


def invalid_url() -> RedisConfigurationError:
    """The error for a URL that is not a Redis URL (the URL is not shown)."""
    return RedisConfigurationError(
        "the Redis URL is not valid: use redis://[[user]:password@]host[:port][/db], "
        "rediss://..., unix://path, or redis+cluster://[[user]:password@]host[:port] "
        "(rediss+cluster://...) for a Redis Cluster (the URL is not shown: it may hold a "
        "password)"
    )


def _chain(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def cluster_start_failure(
    error: BaseException, where: str, timeout: object
) -> core.StoreError | None:
    """The store error for a failure while reading the cluster's slot map (nothing was
    sent), or None when ``error`` is not a Redis, cluster or OS error."""
    chain = _chain(error)
    if not any(isinstance(e, RedisError | RedisClusterException | OSError) for e in chain):
        return None
    if any(isinstance(e, AuthenticationError) for e in chain):
        return connect_failure(AuthenticationError(), where, timeout)
    if any("cluster support disabled" in str(e) or "not enabled" in str(e) for e in chain):
        return RedisConfigurationError(
            f"the Redis server at {where} is not a Redis Cluster node (cluster mode is "
            "disabled): open the store with a redis:// URL"
        )
    if any(isinstance(e, RedisTimeoutError) for e in chain):
        reason = f"no answer {_within(timeout)}"
    else:
        reason = _os_reason(error, "no node answered with the cluster's slot map")
    return RedisUnavailableError(
        f"cannot read the slot map of the Redis Cluster at {where} ({reason}): check that "
        "its nodes run, that the URL's host and port name one of them and that the "
        "cluster is up (cluster_state:ok)"
    )


def not_covered(where: str) -> RedisUnavailableError:
    """The error for a slot that no master of the cluster serves (nothing was sent)."""
    return RedisUnavailableError(
        f"no master of the Redis Cluster at {where} serves the record's slot: the cluster "
        "is down or being resharded; nothing was sent, retry shortly"
    )


def redirected(where: str, times: int) -> RedisUnavailableError:
    """The error for a command redirected ``times`` times (it never ran)."""
    return RedisUnavailableError(
        f"the Redis Cluster at {where} redirected the store's command {times} times "
        "(MOVED, ASK or TRYAGAIN: it never ran, nothing was applied): its slots are "
        "moving; retry shortly"
    )
