"""RedisStore and AsyncRedisStore: checkpoint stores on a Redis server or a Redis
Cluster (redis-py).

Layout on one server, under a prefix (``"tec:"`` by default) that the store owns entirely:

- ``{prefix}rec:{key}``: a hash ``{revision, status, updated_us, record}``, where
  ``record`` is the exact JSON text of :meth:`Checkpoint.to_json` (UTF-8) and the other
  fields are copies the scripts compare and index by (``updated_us``: the record's
  ``updatedAt`` in microseconds since the epoch);
- ``{prefix}idx:{status}``: one sorted set per status, member = key, score = the time of
  the key's last write on the server's clock (``TIME``, microseconds since the epoch), for
  :meth:`RedisStore.list_records` (see :mod:`.redis_scripts`).

Layout on a Redis Cluster (a ``redis+cluster://`` URL or a RedisCluster client). A Lua
script may touch keys of one hash slot only, and the single-server scripts touch a record
and global indexes in different slots (CROSSSLOT). So the keys are split into
:data:`CLUSTER_SHARDS` (16) fixed shards: ``key`` belongs to shard ``sha256(key)[0] mod
16``, its hash is ``{prefix}{TAG}rec:{key}`` and its shard's indexes are
``{prefix}{TAG}idx:{status}``, ``TAG`` being the shard's hash tag (``_SHARD_TAGS``). A
record and the indexes its scripts touch share the tag, hence one slot and one master:
each script still runs atomically on one node. Why fixed shards with tags of their own:
a tag per record would leave no index to list by, and one tag for everything would put
every record on one master. Sixteen shards spread the records over up to 16 masters
while a listing costs 16 small scripts (pipelined, one connection per master). The tags
hash into the 16 sixteenths of the slot space, so equal contiguous slot ranges get equal
shares. The price: a shard is one slot, and while a resharding moves that slot, writes
to its records are refused (TRYAGAIN, not applied). The prefix must not hold ``{`` or
``}`` on a cluster (the tag must be the key's first ``{...}``).

The single-server layout did not change, so a database written before cluster support
reads as before. The two layouts cannot be confused: a cluster store runs only on a
cluster (a server without cluster mode is refused with RedisConfigurationError), and a
single-server store on a cluster node is refused by the server (CROSSSLOT or MOVED,
RedisCommandError, nothing applied).

Routing on a cluster: each command goes to the master that owns its slot in redis-py's
slot map (``RedisCluster.nodes_manager``), on one connection of that node's pool, sent
once. MOVED (the map is updated), ASK (``ASKING`` first, on the named node) and TRYAGAIN
(after 50 ms) mean the command did not run, so it is sent again, at most 5 times in all,
then RedisUnavailableError. CLUSTERDOWN and CROSSSLOT are RedisCommandError, nothing
applied. A failure to connect is RedisUnavailableError (nothing sent). A connection lost
after a write went out is RedisOutcomeUnknownError. After either, the slot map is read
again before the next command. Failover loses acknowledged writes (replication is
asynchronous): see :class:`RedisStore` and the README.

Every write is one Lua script run with EVALSHA, so Redis runs it atomically:
create-if-absent inserts the hash only if the key does not exist (SET NX semantics) and
adds the key to the index; compare-and-swap compares the stored revision, writes the new
record and moves the key between the per-status indexes; both score the key with the
server's ``TIME``. A script that does not report
success changed nothing. A swap to delivered is by default the same script with its
effects kept out of the append-only file (see ``synchronous_delivered`` on
:class:`RedisStore`). Reads are one HGET (then an EXISTS and a second HGET when it
finds no record field: a hash without one is a broken record, not an absent one), or
one read-only script for listings. Every record read goes through
:func:`~tool_execution_checkpoint.stores.decode_stored`.

Round trips: create 1, get 1, CAS 1 (plus SCRIPT LOAD and a second EVALSHA once after
the server lost its script cache: a restart, a failover or SCRIPT FLUSH; plus one per
MOVED, ASK or TRYAGAIN answer on a cluster).

Needs Redis 7.0 or newer: the write scripts start with a ``#!lua`` shebang, so Redis
refuses them before they run (nothing half-written) when it is out of memory, a
read-only replica or unable to persist. Install with the ``redis`` extra (redis-py).
Durability, ambiguous writes and replicas: see :class:`RedisStore`.

Why not redis-py's ``Script.__call__``: it goes through ``execute_command``, whose retry
policy (3 retries on ConnectionError and TimeoutError by default since redis-py 6) sends
the script again after a dropped connection. A CAS whose first copy landed then answers
False: a won claim reported as lost. It also cannot tell a refused connection (nothing
sent) from a connection lost after the command went out (outcome unknown). This module
therefore takes one connection from the client's pool per operation, sends the command
exactly once, handles NOSCRIPT the way ``Script`` does (SCRIPT LOAD, then EVALSHA again:
NOSCRIPT means the script did not run) and classifies failures by when they happened.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.connection import parse_url
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    AuthenticationError,
    BusyLoadingError,
    ClusterCrossSlotError,
    ClusterDownError,
    MaxConnectionsError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from ..errors import CheckpointError, ErrorCode
from ..records import Checkpoint
from ..table import TABLE, Status
from ..validation import check_flag, check_identifier
from .core import (
    BrokenRecord,
    OutcomeUnknownError,
    RecordSummary,
    StoreConfigurationError,
    StoreError,
    StoreNotAppliedError,
    StoreUnavailableError,
    check_key,
    check_listing,
    decode_stored,
    encode_create,
    encode_swap,
    listing_line,
)
from .redis_scripts import (
    CANDIDATES,
    CREATE,
    FETCH,
    SCRIPTS,
    STATUS_ORDER,
    SWAP,
    SWAP_RELAXED,
    WRITTEN,
    Script,
    score_bound,
)

__all__ = [
    "CLUSTER_SHARDS",
    "DEFAULT_PREFIX",
    "SCRIPTS",
    "AsyncRedisStore",
    "DurabilityReport",
    "RedisAuthenticationError",
    "RedisCommandError",
    "RedisConfigurationError",
    "RedisDurabilityError",
    "RedisDurabilityWarning",
    "RedisOutcomeUnknownError",
    "RedisReplyError",
    "RedisStore",
    "RedisStoreError",
    "RedisUnavailableError",
]

DEFAULT_PREFIX = "tec:"
DEFAULT_SOCKET_TIMEOUT = 5.0
"""Seconds a store built from a URL waits for a reply before giving up."""
DEFAULT_CONNECT_TIMEOUT = 2.0
"""Seconds a store built from a URL waits for a connection before giving up."""

_CEILING = TABLE.limits.ceiling_max_payload_bytes
_FETCH_CHUNK = 256
"""How many records one listing round trip fetches at most."""

CLUSTER_SHARDS = 16
"""How many shards a cluster store spreads its keys over (fixed: the layout depends on
it; every process on one cluster must agree)."""

_SHARD_TAGS = (
    "tec00-0", "tec01-3", "tec02-23", "tec03-20", "tec04-60", "tec05-63", "tec06-40",
    "tec07-43", "tec08-23", "tec09-20", "tec10-10", "tec11-13", "tec12-22", "tec13-21",
    "tec14-1", "tec15-2",
)  # fmt: skip
"""The hash tag of each shard. Tag ``i`` hashes to a slot in ``[1024 i, 1024 (i + 1))``
(CRC16 mod 16384, as Redis computes it), so the shards cover the slot space evenly and a
cluster whose masters own contiguous slot ranges of similar size (what ``redis-cli
--cluster create`` makes) gets a similar number of shards on each master."""

_REDIRECTS = 5
"""How many times a cluster store sends a command that was answered MOVED, ASK or
TRYAGAIN (each such answer means the command did not run) before giving up."""

_T = TypeVar("_T")
OnWeak = Literal["raise", "warn", "ignore"]


# --- errors ----------------------------------------------------------------------------


class RedisStoreError(StoreError):
    """A Redis store operation failed: the base of the store's errors, each of which is
    also in one category of :class:`~tool_execution_checkpoint.stores.StoreError`."""


class RedisUnavailableError(RedisStoreError, StoreUnavailableError):
    """The server could not be reached, did not answer in time, or is still loading its
    data. Raised before a command was sent, or for a read: no write was applied by the
    call that raised it."""


class RedisAuthenticationError(RedisStoreError, StoreConfigurationError):
    """The server refused the credentials (wrong or missing password or user name). The
    message never shows the password."""


class RedisConfigurationError(RedisStoreError, StoreConfigurationError):
    """The store is configured wrongly: a URL that is not a Redis URL, or a server whose
    settings break the storage contract (see :class:`RedisDurabilityError`)."""


class RedisDurabilityError(RedisConfigurationError):
    """The server's persistence settings do not make an acknowledged write survive a
    crash (raised by ``check_durability`` under the ``"raise"`` policy)."""


class RedisDurabilityWarning(UserWarning):
    """The server's persistence settings are weak (``check_durability(on_weak="warn")``)."""


class RedisCommandError(RedisStoreError, StoreNotAppliedError):
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


class RedisOutcomeUnknownError(RedisStoreError, OutcomeUnknownError):
    """A write was sent and may or may not have run: the connection failed or timed out
    before its reply, the reply was not one the store understands, or the server
    refused it with an error that may come from inside the script (``code``, else
    None). Read the record back: it is at the old revision (not applied) or is exactly
    the record that was written (applied), never anything in between."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class RedisReplyError(RedisStoreError, StoreNotAppliedError):
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


def _error_code(error: ResponseError) -> str:
    for kind, name in _CLUSTER_CODES:
        if isinstance(error, kind):
            return name
    code = getattr(error, "status_code", None)
    if isinstance(code, str) and code:
        return code
    first = str(error).split(" ", 1)[0]
    return first if first.isalpha() and first.isupper() else "ERR"


_CLUSTER_CODES: tuple[tuple[type[ResponseError], str], ...] = (
    (MovedError, "MOVED"),  # before AskError: redis-py's MovedError is an AskError
    (AskError, "ASK"),
    (TryAgainError, "TRYAGAIN"),
    (ClusterDownError, "CLUSTERDOWN"),
    (ClusterCrossSlotError, "CROSSSLOT"),
)


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


def _connect_failure(error: BaseException, where: str, timeout: object) -> StoreError | None:
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
    code = _error_code(error)
    hint = _COMMAND_HINTS.get(code, "see the server's log")
    return RedisCommandError(
        f"the Redis server at {where} refused the store's command ({code}): {hint}", code
    )


def _exchange_failure(
    error: BaseException, request: _Request, where: str, timeout: object
) -> StoreError | None:
    """The store error for a failure after the command may have been sent, or None when
    ``error`` is not a Redis or OS error."""
    if isinstance(error, AuthenticationError | BusyLoadingError):
        return _connect_failure(error, where, timeout)  # the server refused the command
    if isinstance(error, ResponseError):
        refusal = _command_failure(error, where)
        if request.write and refusal.code not in _REFUSED_BEFORE_WRITING:
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
    if request.write:
        return RedisOutcomeUnknownError(
            f"the connection to the Redis server at {where} failed after a write was sent "
            f"({what}): it may or may not have been applied; read the record back and "
            "decide again"
        )
    return RedisUnavailableError(
        f"the connection to the Redis server at {where} failed during a read ({what}): "
        "retry the read"
    )


def _where(connection_kwargs: Mapping[str, Any]) -> str:
    """Where the pool connects: host:port/db or the unix socket path (no credentials)."""
    database = connection_kwargs.get("db", 0)
    path = connection_kwargs.get("path")
    if path:
        return f"unix:{path} (db {database})"
    host = connection_kwargs.get("host", "localhost")
    port = connection_kwargs.get("port", 6379)
    return f"{host}:{port}/{database}"


# --- requests: what the shared logic asks the sync or async driver to send --------------


@dataclass(frozen=True, slots=True)
class _Request:
    """One command to send once. ``write`` says whether a failure after sending leaves
    the outcome unknown; ``script`` is set for EVALSHA, to answer NOSCRIPT; ``route`` is
    a key the command touches (all its keys share its slot), by which a cluster store
    finds the master to send it to (None: a server command, sent to a node named by the
    caller)."""

    args: tuple[bytes, ...]
    write: bool
    script: Script | None = None
    route: bytes | None = None


@dataclass(frozen=True, slots=True)
class _Batch:
    """Reads whose order does not matter, answered as a list in the same order. A
    cluster store pipelines them, one connection per master (the asyncio store asks the
    masters at the same time); a single-node store sends them one by one."""

    requests: tuple[_Request, ...]


def _packed(*commands: Sequence[bytes]) -> tuple[bytes]:
    """``commands`` in the Redis protocol, as one buffer for ``send_packed_command``.

    A request is an array of bulk strings in RESP2 and RESP3 alike; the store's
    arguments are bytes already, so redis-py's general packer (which encodes each
    argument and re-joins the buffer at every one) is not needed."""
    parts: list[bytes] = []
    for command in commands:
        parts.append(b"*%d\r\n" % len(command))
        for argument in command:
            parts += (b"$%d\r\n" % len(argument), argument, b"\r\n")
    return (b"".join(parts),)


_Operation = Generator[_Request | _Batch, object, _T]


def _call(script: Script, keys: Sequence[bytes], args: Sequence[bytes], *, write: bool) -> _Request:
    """EVALSHA of ``script``, routed by its first key."""
    command = (b"EVALSHA", script.sha, str(len(keys)).encode("ascii"), *keys, *args)
    return _Request(command, write=write, script=script, route=keys[0])


def _answer(reply: object) -> bool:
    if reply == 1:
        return True
    if reply == 0:
        return False
    raise RedisOutcomeUnknownError(
        "the Redis server gave a reply to a write the store does not understand: it may "
        "or may not have been applied; read the record back and decide again"
    )


@dataclass(frozen=True, slots=True)
class DurabilityReport:
    """The server's persistence settings as ``check_durability`` read them.

    ``problems`` says, for each setting that breaks the storage contract, what can be
    lost and what to set; it is empty when acknowledged writes survive a crash of the
    server and of its machine."""

    appendonly: str | None
    appendfsync: str | None
    no_appendfsync_on_rewrite: str | None
    maxmemory_policy: str | None
    problems: tuple[str, ...]

    @property
    def durable(self) -> bool:
        """True when no setting breaks the contract."""
        return not self.problems


def _durability_problems(settings: Mapping[str, str | None]) -> list[str]:
    problems = []
    appendonly = settings["appendonly"]
    fsync = settings["appendfsync"]
    if appendonly != "yes":
        problems.append(
            f"appendonly is {appendonly}: without the append-only file a crash or "
            "restart loses every write since the last snapshot; set appendonly yes"
        )
    if fsync == "everysec":
        problems.append(
            "appendfsync is everysec: a crash of the machine (or of the server while "
            "the disk is slow) can lose about the last two seconds of acknowledged "
            "writes, a won claim among them; set appendfsync always"
        )
    elif fsync != "always":
        problems.append(
            f"appendfsync is {fsync}: the operating system flushes the append-only file "
            "when it likes (often every 30 s), so a machine crash loses acknowledged "
            "writes; set appendfsync always"
        )
    if settings["no-appendfsync-on-rewrite"] == "yes":
        problems.append(
            "no-appendfsync-on-rewrite is yes: fsync is skipped while the append-only "
            "file is rewritten; set no-appendfsync-on-rewrite no"
        )
    policy = settings["maxmemory-policy"]
    if policy is not None and policy.startswith("allkeys-"):
        problems.append(
            f"maxmemory-policy is {policy}: the server may evict checkpoint records, and "
            "an evicted claimed record is re-created as ready and its tool run again; "
            "set maxmemory-policy noeviction"
        )
    return problems


def _apply_policy(report: DurabilityReport, on_weak: OnWeak) -> DurabilityReport:
    if report.durable or on_weak == "ignore":
        return report
    message = "the Redis server's settings do not make writes durable: " + "; ".join(
        report.problems
    )
    if on_weak == "raise":
        raise RedisDurabilityError(message)
    warnings.warn(message, RedisDurabilityWarning, stacklevel=3)
    return report


def _check_on_weak(on_weak: object) -> OnWeak:
    if on_weak not in ("raise", "warn", "ignore"):
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            'must be "raise", "warn" or "ignore"',
            field="on_weak",
        )
    return on_weak


# --- the logic both stores share, written once as generators of requests ---------------


class _Layout:
    """Key names, argument checks and the operations as generators of requests.

    A single-node layout has one shard whose keys are ``{prefix}rec:{key}`` and
    ``{prefix}idx:{status}``; a cluster layout has :data:`CLUSTER_SHARDS` shards whose
    keys carry the shard's hash tag, ``{prefix}{{tag}}rec:{key}`` and
    ``{prefix}{{tag}}idx:{status}`` (see the module docstring)."""

    def __init__(self, prefix: object, *, cluster: bool = False, relax: bool = True) -> None:
        self.prefix = check_identifier(prefix, "prefix", ErrorCode.INVALID_ARGUMENT)
        self.relax = relax
        if cluster and ("{" in self.prefix or "}" in self.prefix):
            raise CheckpointError(
                ErrorCode.INVALID_ARGUMENT,
                "must not hold { or } on a Redis Cluster: the store's hash tags follow it",
                field="prefix",
            )
        self.cluster = cluster
        encoded = self.prefix.encode("utf-8")
        heads = (
            tuple(encoded + b"{" + tag.encode("ascii") + b"}" for tag in _SHARD_TAGS)
            if cluster
            else (encoded,)
        )
        self._records = tuple(head + b"rec:" for head in heads)
        self._indexes = tuple(
            {status: head + b"idx:" + status.value.encode() for status in Status} for head in heads
        )
        self._all_indexes = tuple(
            tuple(indexes[status] for status in STATUS_ORDER) for indexes in self._indexes
        )

    @property
    def shards(self) -> int:
        """How many shards the layout has: 1 on a single node."""
        return len(self._records)

    def shard_of(self, key: str) -> int:
        """The shard that holds ``key``'s record and index entries."""
        if not self.cluster:
            return 0
        return hashlib.sha256(key.encode("utf-8")).digest()[0] % CLUSTER_SHARDS

    def record_key(self, key: str) -> bytes:
        return self._records[self.shard_of(key)] + key.encode("utf-8")

    def index_key(self, key: str, status: Status) -> bytes:
        """The index of ``status`` in ``key``'s shard."""
        return self._indexes[self.shard_of(key)][status]

    def shard_indexes(self, shard: int) -> Mapping[Status, bytes]:
        """The per-status indexes of one shard."""
        return self._indexes[shard]

    def create(self, key: str, record: Checkpoint) -> _Operation[bool]:
        encoded = encode_create(key, record)
        record = encoded.record
        args = (
            str(record.revision).encode("ascii"),
            record.status.value.encode(),
            str(encoded.updated_us).encode("ascii"),
            encoded.text.encode("utf-8"),
            key.encode("utf-8"),
        )
        keys = (self.record_key(key), self.index_key(key, record.status))
        return _answer((yield _call(CREATE, keys, args, write=True)))

    def swap(self, key: str, expected_revision: int, record: Checkpoint) -> _Operation[bool]:
        encoded = encode_swap(key, expected_revision, record)
        record = encoded.record
        args = (
            str(expected_revision).encode("ascii"),
            str(record.revision).encode("ascii"),
            record.status.value.encode(),
            str(encoded.updated_us).encode("ascii"),
            encoded.text.encode("utf-8"),
            key.encode("utf-8"),
        )
        keys = (self.record_key(key), *self._all_indexes[self.shard_of(key)])
        relaxed = self.relax and record.status in TABLE.relaxed_statuses
        script = SWAP_RELAXED if relaxed else SWAP
        return _answer((yield _call(script, keys, args, write=True)))

    def get(self, key: str) -> _Operation[Mapping[str, Any] | None]:
        check_key(key)
        name = self.record_key(key)
        reply = yield _Request((b"HGET", name, b"record"), write=False, route=name)
        if reply is None:
            # No record field: an absent key, or a hash without it (broken). The store
            # never deletes a hash, so once EXISTS saw it, a second HGET that still finds
            # no field is a broken record, not one created meanwhile.
            if not (yield _Request((b"EXISTS", name), write=False, route=name)):
                return None
            reply = yield _Request((b"HGET", name, b"record"), write=False, route=name)
            if reply is None:
                raise CheckpointError(
                    ErrorCode.INVALID_CHECKPOINT, "the record's hash has no record field"
                )
        return _parse_record(reply)

    def clock(self) -> _Operation[int]:
        """The server's TIME in microseconds; on a cluster the earliest of the masters'
        (one TIME per shard), so that no record looks older than its own master's clock
        makes it."""
        first = STATUS_ORDER[0]
        times = tuple(
            _Request((b"TIME",), write=False, route=indexes[first]) for indexes in self._indexes
        )
        return min(_time_us(reply) for reply in _array((yield _Batch(times))))

    def written(self, key: str) -> _Operation[int | None]:
        check_key(key)
        keys = (self.record_key(key), *self._all_indexes[self.shard_of(key)])
        reply = yield _call(WRITTEN, keys, (key.encode("utf-8"),), write=False)
        return None if reply is None else _score_us(reply)

    def list_records(
        self,
        statuses: Collection[Status],
        written_before_us: int | None,
        after_key: str | None,
        limit: int,
    ) -> _Operation[list[RecordSummary | BrokenRecord]]:
        query = check_listing(statuses, written_before_us, after_key, limit)
        if not query.statuses:
            return []
        before, after = query.written_before_us, query.after_key
        wanted = tuple(status for status in STATUS_ORDER if status in query.statuses)
        written: dict[str, int] = {}
        bound = score_bound(before)
        shards = tuple(  # one script per shard: each touches one slot
            _call(CANDIDATES, tuple(indexes[status] for status in wanted), (bound,), write=False)
            for indexes in self._indexes
        )
        for reply in _array((yield _Batch(shards))):
            pairs = _array(reply)
            for member, score in zip(pairs[0::2], pairs[1::2], strict=True):
                written[_text(member)] = _score_us(score)
        candidates = sorted(
            key
            for key, us in written.items()
            if (after is None or key > after) and (before is None or us < before)
        )
        found: list[RecordSummary | BrokenRecord] = []
        position = 0
        while position < len(candidates) and len(found) < query.limit:
            chunk = candidates[position : position + min(query.limit - len(found), _FETCH_CHUNK)]
            position += len(chunk)
            by_shard: dict[int, list[str]] = {}
            for key in chunk:
                by_shard.setdefault(self.shard_of(key), []).append(key)
            groups = [by_shard[shard] for shard in sorted(by_shard)]
            fetches = tuple(
                _call(FETCH, tuple(self.record_key(key) for key in group), (), write=False)
                for group in groups
            )
            texts: dict[str, object] = {}
            for group, reply in zip(groups, _array((yield _Batch(fetches))), strict=True):
                texts.update(zip(group, _array(reply), strict=True))
            for key in chunk:
                text = texts[key]
                if text is None or text is False:  # Lua's false for a missing hash
                    continue
                line = _listed(key, text, written[key])
                if isinstance(line, BrokenRecord) or query.admits(line):
                    found.append(line)
        return found

    def durability(self) -> _Operation[DurabilityReport]:
        settings: dict[str, str | None] = {}
        names = ("appendonly", "appendfsync", "no-appendfsync-on-rewrite", "maxmemory-policy")
        try:
            for name in names:
                reply = yield _Request((b"CONFIG", b"GET", name.encode()), write=False)
                settings[name] = _config_value(reply)
        except RedisCommandError as error:
            problem = (
                f"cannot read the persistence settings: the server refused CONFIG GET "
                f"({error.code}); check appendonly yes, appendfsync always and "
                "maxmemory-policy noeviction with the server's operator"
            )
            return DurabilityReport(None, None, None, None, (problem,))
        return DurabilityReport(
            settings["appendonly"],
            settings["appendfsync"],
            settings["no-appendfsync-on-rewrite"],
            settings["maxmemory-policy"],
            tuple(_durability_problems(settings)),
        )


def _parse_record(reply: object) -> Mapping[str, Any]:
    """The record a HGET read (see :func:`~tool_execution_checkpoint.stores.decode_stored`)."""
    if not isinstance(reply, bytes):
        raise RedisReplyError("the Redis server gave a reply the store does not understand")
    return decode_stored(reply)


def _listed(key: str, text: object, written_us: int) -> RecordSummary | BrokenRecord:
    """The listing line of a record text FETCH read (0: a hash without its record),
    written at ``written_us`` (its index score)."""
    if text == 0:
        missing = CheckpointError(
            ErrorCode.INVALID_CHECKPOINT, "the record's hash has no record field"
        )
        return BrokenRecord.of(key, missing)
    if not isinstance(text, bytes):
        raise RedisReplyError("the Redis server gave a reply the store does not understand")
    return listing_line(key, text, written_us=written_us)


def _score_us(score: object) -> int:
    """An index score (the time of a write) as whole microseconds."""
    try:
        value = float(score) if isinstance(score, bytes) else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise RedisReplyError(
            "the store's index holds a score that is not a time: a foreign value under the "
            "store's prefix"
        )
    return int(value)


def _time_us(reply: object) -> int:
    """A TIME reply (seconds, microseconds) as microseconds since the epoch."""
    parts = _array(reply)
    if len(parts) != 2 or not all(isinstance(part, bytes) and part.isdigit() for part in parts):
        raise RedisReplyError("the Redis server gave a reply the store does not understand")
    seconds, micros = (int(cast(bytes, part)) for part in parts)
    return seconds * 1_000_000 + micros


def _config_value(reply: object) -> str | None:
    """The value in a CONFIG GET reply for one name: [name, value] (RESP2) or
    {name: value} (RESP3); None when the server does not know the name."""
    pairs = list(reply.values()) if isinstance(reply, dict) else _array(reply)[1::2]
    return _text(pairs[0]) if len(pairs) == 1 else None


def _array(reply: object) -> list[object]:
    if not isinstance(reply, list):
        raise RedisReplyError("the Redis server gave a reply the store does not understand")
    return reply


def _text(value: object) -> str:
    if not isinstance(value, bytes):
        raise RedisReplyError("the Redis server gave a reply the store does not understand")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:  # its ``object`` is the value: not kept as a context
        pass
    raise RedisReplyError(
        "the store's index holds a key that is not UTF-8: a foreign value under the store's prefix"
    )


# --- redis-py connections, typed as far as the store uses them ----------------------------


class _SyncConnection(Protocol):
    def send_packed_command(self, command: Sequence[bytes], check_health: bool = ...) -> None: ...

    def read_response(self, disable_decoding: bool = ...) -> object: ...


class _SyncPool(Protocol):
    connection_kwargs: dict[str, Any]

    def get_connection(self) -> _SyncConnection: ...

    def release(self, connection: _SyncConnection) -> None: ...


class _AsyncConnection(Protocol):
    async def send_packed_command(
        self, command: Sequence[bytes], check_health: bool = ...
    ) -> None: ...

    async def read_response(self, disable_decoding: bool = ...) -> object: ...


class _AsyncPool(Protocol):
    connection_kwargs: dict[str, Any]

    async def get_connection(self) -> _AsyncConnection: ...

    async def release(self, connection: _AsyncConnection) -> None: ...


class _Node(Protocol):
    """A cluster node as redis-py's NodesManager keeps it (sync and asyncio)."""

    name: str


_NodeT = TypeVar("_NodeT", bound=_Node)
_NodeT_co = TypeVar("_NodeT_co", bound=_Node, covariant=True)


class _SlotMap(Protocol[_NodeT_co]):
    """What both NodesManagers (sync and asyncio) answer alike: a slot's master."""

    def get_node_from_slot(self, slot: int) -> _NodeT_co: ...


class _SyncNodes(Protocol):
    """redis.cluster.NodesManager, as far as the store uses it."""

    def get_node_from_slot(self, slot: int) -> _Node: ...

    def get_node(self, host: str | None = ..., port: int | None = ...) -> _Node | None: ...

    def move_slot(self, error: MovedError) -> None: ...

    def initialize(self) -> None: ...


class _SyncCluster(Protocol):
    """redis.cluster.RedisCluster, as far as the store uses it."""

    nodes_manager: _SyncNodes

    def get_redis_connection(self, node: _Node) -> redis.Redis: ...

    def get_primaries(self) -> list[_Node]: ...

    def close(self) -> None: ...


class _AsyncNode(_Node, Protocol):
    """redis.asyncio.cluster.ClusterNode, as far as the store uses it."""

    connection_kwargs: dict[str, Any]

    def acquire_connection(self) -> Any: ...

    async def disconnect_if_needed(self, connection: Any) -> None: ...

    def release(self, connection: Any) -> None: ...


class _AsyncNodes(Protocol):
    """redis.asyncio.cluster.NodesManager, as far as the store uses it."""

    def get_node_from_slot(self, slot: int) -> _AsyncNode: ...

    def get_node(self, host: str | None = ..., port: int | None = ...) -> _AsyncNode | None: ...

    async def move_slot(self, error: MovedError) -> None: ...

    async def initialize(self) -> None: ...


class _AsyncCluster(Protocol):
    """redis.asyncio.cluster.RedisCluster, as far as the store uses it."""

    nodes_manager: _AsyncNodes

    async def initialize(self) -> Any: ...

    def get_primaries(self) -> list[_AsyncNode]: ...

    async def aclose(self) -> None: ...


class _NodePool:
    """One asyncio cluster node's connections as an :class:`_AsyncPool`: a connection
    connected (AUTH, HELLO) before the store sends anything on it."""

    def __init__(self, node: _AsyncNode) -> None:
        self._node = node
        self.connection_kwargs = node.connection_kwargs

    async def get_connection(self) -> _AsyncConnection:
        connection = self._node.acquire_connection()
        try:
            await connection.connect()
        except BaseException:
            await connection.disconnect()
            self._node.release(connection)
            raise
        result: _AsyncConnection = connection
        return result

    async def release(self, connection: _AsyncConnection) -> None:
        await self._node.disconnect_if_needed(connection)
        self._node.release(connection)


def _invalid_url() -> RedisConfigurationError:
    return RedisConfigurationError(
        "the Redis URL is not valid: use redis://[[user]:password@]host[:port][/db], "
        "rediss://..., unix://path, or redis+cluster://[[user]:password@]host[:port] "
        "(rediss+cluster://...) for a Redis Cluster (the URL is not shown: it may hold a "
        "password)"
    )


def _sync_client(url: str, socket_timeout: float, connect_timeout: float) -> redis.Redis:
    try:
        return redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            retry=Retry(NoBackoff(), 0),
        )
    except (ValueError, TypeError, KeyError):  # may quote the URL: not kept as a context
        pass
    raise _invalid_url()


def _async_client(url: str, socket_timeout: float, connect_timeout: float) -> redis.asyncio.Redis:
    try:
        return redis.asyncio.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            retry=AsyncRetry(NoBackoff(), 0),
        )
    except (ValueError, TypeError, KeyError):  # may quote the URL: not kept as a context
        pass
    raise _invalid_url()


_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def _plain_cluster_url(url: str) -> str | None:
    """The ``redis://`` (``rediss://``) URL of a ``redis+cluster://``
    (``rediss+cluster://``) URL, which redis-py's cluster clients take; None for any
    other URL."""
    scheme, separator, rest = url.partition("://")
    plain = _CLUSTER_SCHEMES.get(scheme.lower()) if separator else None
    return None if plain is None else f"{plain}://{rest}"


def _cluster_seed(url: str) -> str:
    """``host:port`` of the node a cluster URL names, after checking the URL as redis-py
    will (database 0 only: a cluster has no other)."""
    options: dict[str, Any] | None
    try:
        options = dict(cast(Callable[[str], dict[str, Any]], parse_url)(url))
    except (ValueError, TypeError, KeyError):  # may quote the URL: not kept as a context
        options = None
    if options is None or "host" not in options:
        raise _invalid_url()
    if options.get("db", 0) != 0:
        raise RedisConfigurationError(
            "a Redis Cluster has only database 0: drop the database from the redis+cluster:// URL"
        )
    return f"{options['host']}:{options.get('port', 6379)}"


def _sync_cluster(url: str, socket_timeout: float, connect_timeout: float) -> _SyncCluster:
    """redis-py's cluster client on ``url``; it reads the slot map (CLUSTER SLOTS) when
    built, so the store builds it on first use."""
    client: Any = redis.cluster.RedisCluster.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        retry=Retry(NoBackoff(), 0),
    )
    result: _SyncCluster = client
    return result


def _async_cluster(url: str, socket_timeout: float, connect_timeout: float) -> Any:
    try:
        return redis.asyncio.cluster.RedisCluster.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            retry=AsyncRetry(NoBackoff(), 0),
        )
    except (ValueError, TypeError, KeyError, RedisClusterException):  # may quote the URL
        pass
    raise _invalid_url()


def _chain(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _cluster_start_failure(error: BaseException, where: str, timeout: object) -> StoreError | None:
    """The store error for a failure while reading the cluster's slot map (nothing was
    sent), or None when ``error`` is not a Redis, cluster or OS error."""
    chain = _chain(error)
    if not any(isinstance(e, RedisError | RedisClusterException | OSError) for e in chain):
        return None
    if any(isinstance(e, AuthenticationError) for e in chain):
        return _connect_failure(AuthenticationError(), where, timeout)
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


def _not_covered(where: str) -> RedisUnavailableError:
    return RedisUnavailableError(
        f"no master of the Redis Cluster at {where} serves the record's slot: the cluster "
        "is down or being resharded; nothing was sent, retry shortly"
    )


def _redirected(where: str) -> RedisUnavailableError:
    return RedisUnavailableError(
        f"the Redis Cluster at {where} redirected the store's command {_REDIRECTS} times "
        "(MOVED, ASK or TRYAGAIN: it never ran, nothing was applied): its slots are "
        "moving; retry shortly"
    )


def _merged(reports: Sequence[tuple[str, DurabilityReport]]) -> DurabilityReport:
    """One report for a cluster: a setting is shown when every master agrees on it
    (None otherwise), and every master's problems are listed under its name."""

    def agreed(values: list[str | None]) -> str | None:
        return values[0] if values and len(set(values)) == 1 else None

    problems = [f"{name}: {problem}" for name, report in reports for problem in report.problems]
    if not reports:
        problems.append("the cluster's slot map names no master")
    return DurabilityReport(
        agreed([report.appendonly for _, report in reports]),
        agreed([report.appendfsync for _, report in reports]),
        agreed([report.no_appendfsync_on_rewrite for _, report in reports]),
        agreed([report.maxmemory_policy for _, report in reports]),
        tuple(problems),
    )


def _check_url(value: object) -> str:
    if type(value) is not str:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "must be a redis-py client or a Redis URL string",
            field="client_or_url",
        )
    return value


_REDIRECTS_RAISED = (AskError, TryAgainError)  # MovedError is an AskError

_ClientT = TypeVar(
    "_ClientT",
    redis.Redis | redis.cluster.RedisCluster,
    redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster,
)


class _RedisStoreBase(Generic[_ClientT]):
    """What both stores take and show: the constructor, :meth:`from_url`, the prefix,
    the client and the repr. Nothing is contacted."""

    _CLIENT: ClassVar[type[Any]]
    """The client class: redis.Redis or redis.asyncio.Redis."""
    _CLUSTER: ClassVar[type[Any]]
    """The cluster client class: redis.cluster.RedisCluster or its asyncio twin."""
    _pool: Any
    _client: Any

    @staticmethod
    def _new_client(url: str, socket_timeout: float, connect_timeout: float) -> Any:
        """A client of the store's kind on ``url``, owned by the store."""
        raise NotImplementedError

    def _adopt_cluster(
        self, url: str | None, socket_timeout: float, connect_timeout: float
    ) -> None:
        """Keep the cluster client passed in (``url`` None, in ``_client``) or arrange
        one on ``url``."""
        raise NotImplementedError

    def __init__(
        self,
        client_or_url: _ClientT | str,
        *,
        prefix: str = DEFAULT_PREFIX,
        synchronous_delivered: bool = False,
    ) -> None:
        self._setup(
            client_or_url,
            prefix,
            DEFAULT_SOCKET_TIMEOUT,
            DEFAULT_CONNECT_TIMEOUT,
            synchronous_delivered,
        )

    def _setup(
        self,
        client_or_url: object,
        prefix: str,
        socket_timeout: float,
        connect_timeout: float,
        synchronous_delivered: object,
    ) -> None:
        self._stale = False
        self._owns_client = False
        relax = not check_flag(synchronous_delivered, "synchronous_delivered")
        if isinstance(client_or_url, self._CLUSTER):
            self._layout = _Layout(prefix, cluster=True, relax=relax)
            self._client = client_or_url
            startup = list(getattr(client_or_url.nodes_manager, "startup_nodes", {}))
            self._where = startup[0] if startup else "a Redis Cluster"
            self._adopt_cluster(None, socket_timeout, connect_timeout)
            return
        if isinstance(client_or_url, self._CLIENT):
            self._layout = _Layout(prefix, relax=relax)
            self._client = client_or_url
        else:
            url = _check_url(client_or_url)
            plain = _plain_cluster_url(url)
            self._layout = _Layout(prefix, cluster=plain is not None, relax=relax)
            self._owns_client = True
            if plain is not None:
                self._where = _cluster_seed(plain)
                self._adopt_cluster(plain, socket_timeout, connect_timeout)
                return
            self._client = self._new_client(url, socket_timeout, connect_timeout)
        self._pool = self._client.connection_pool
        self._where = _where(self._pool.connection_kwargs)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        synchronous_delivered: bool = False,
    ) -> Self:
        """A store on a client built from ``url``, owned by the store: ``redis://``,
        ``rediss://`` or ``unix://`` for one server, ``redis+cluster://`` or
        ``rediss+cluster://`` (``[[user]:password@]host[:port]``, any one node) for a
        Redis Cluster. Nothing is contacted until the first call. ``prefix`` and
        ``synchronous_delivered`` are the constructor's."""
        store = cls.__new__(cls)
        store._setup(
            _check_url(url), prefix, socket_timeout, connect_timeout, synchronous_delivered
        )
        return store

    @property
    def prefix(self) -> str:
        """The prefix of every key the store writes."""
        return self._layout.prefix

    @property
    def cluster(self) -> bool:
        """Whether the store is on a Redis Cluster (hash-tagged, sharded layout)."""
        return self._layout.cluster

    def _owner(self, manager: _SlotMap[_NodeT], request: _Request) -> _NodeT:
        """The master that owns ``request``'s slot in the client's slot map (sync or
        asyncio alike); a slot with no master marks the map stale and is refused."""
        if request.route is None:  # pragma: no cover - server commands always name a node
            raise RedisReplyError("a cluster store sent a command with no key and no node")
        try:
            return manager.get_node_from_slot(key_slot(request.route))
        except RedisClusterException:
            self._stale = True
        raise _not_covered(self._where)

    def __repr__(self) -> str:
        where = f"cluster {self._where}" if self._layout.cluster else self._where
        return f"{type(self).__name__}({where}, prefix={self._layout.prefix!r})"


# --- the synchronous store ------------------------------------------------------------------


class RedisStore(_RedisStoreBase[redis.Redis | redis.cluster.RedisCluster]):
    """A checkpoint store on a Redis server or a Redis Cluster, over a synchronous
    redis-py client.

    ``RedisStore(client_or_url, *, prefix="tec:", synchronous_delivered=False)`` takes a
    ``redis.Redis`` client (the store uses its connection pool and does not close it;
    its retry settings do not apply to the store's commands, which are always sent
    once), a
    ``redis.cluster.RedisCluster`` client (the store uses its slot map and node pools,
    never its ``execute_command``), or a URL such as ``redis://:PASSWORD@127.0.0.1:6379/0``
    or ``redis+cluster://:PASSWORD@10.0.0.1:7000`` (the store builds and owns the
    client, with ``socket_timeout`` 5 s and ``socket_connect_timeout`` 2 s unless the
    URL's query sets them). It is safe to share between threads. ``close()`` closes a
    client the store built.

    Contract: ``create_if_absent``, ``get`` and ``compare_and_swap`` as in
    :class:`~tool_execution_checkpoint.stores.CheckpointStore`; each write is one atomic
    Lua script (EVALSHA). Bad arguments raise :class:`CheckpointError`
    (INVALID_ARGUMENT); every failure to talk to Redis raises a :class:`StoreError`
    subclass whose message names what to fix and never shows a payload or a password:

    - :class:`RedisUnavailableError`: no connection (refused, timed out, server
      loading, no master for the slot, redirected too often); nothing was sent, or the
      operation was a read, or the cluster answered that the command did not run;
    - :class:`RedisAuthenticationError`: wrong or missing credentials;
    - :class:`RedisCommandError`: the server answered with an error (OOM, READONLY,
      NOPERM, CLUSTERDOWN, CROSSSLOT...); the scripts are refused before they run, so
      nothing was applied;
    - :class:`RedisOutcomeUnknownError` (an :class:`OutcomeUnknownError`): the
      connection failed or timed out after a write was sent. Read the record back: it
      is either unchanged or exactly the record written (which carries the writer's own
      attempt or delivery id), never in between. Never retry the write blindly: a
      landed CAS retried answers False.

    On a cluster, each command goes to the master that owns its slot in redis-py's slot
    map. A MOVED answer updates the map and an ASK answer sends ``ASKING`` first, and
    the command is sent again to the named node; TRYAGAIN waits 50 ms and sends it
    again: each of these answers means the command did not run, so only the last send
    can have run it (at most 5 sends). A refused connection or a lost one marks the map
    stale: the next operation reads it again first.

    Durability needs the server (every master of a cluster) to run with ``appendonly
    yes`` and ``appendfsync always`` (each write is fsynced to the append-only file
    before Redis replies), with ``no-appendfsync-on-rewrite no`` and a
    ``maxmemory-policy`` that never evicts the store's keys (``noeviction``). With
    ``appendfsync everysec`` a crash of the machine (or of the server while the disk is
    slow) can lose about the last two seconds of acknowledged writes: a won claim may
    vanish, the record comes back as ready and the tool runs twice. With ``appendonly
    no`` every write since the last snapshot is lost. :meth:`check_durability` reads
    these settings (on every master of a cluster) and raises, warns or reports.

    **Delivered marks are not appended to the append-only file** (unless
    ``synchronous_delivered=True``). A ``compare_and_swap`` whose record's status is in
    ``TABLE.relaxed_statuses`` (today delivered, which only complete_delivery and
    prune_result land in) is the same one script, which first calls
    ``redis.set_repl(redis.REPL_REPLICA)``: its effects are applied in memory and sent to
    replicas, but not written to the AOF, so Redis answers it without an fsync. Every
    other write is appended and fsynced as above. The compare-and-swap is unchanged, and
    ``get`` reads back exactly the record written.

    *What may be lost.* Such a mark reaches the disk only when the AOF is next rewritten
    (BGREWRITEAOF, by hand or automatic), or on a replica with ``appendonly yes``, which
    appends what it receives; a replica keeps it only until a full resync from a primary
    restarted without it (promoted before that primary returns, it keeps the mark).
    A restart from the AOF before that, after a crash or a clean shutdown alike, reads the
    record back as the one before: delivering, with its result. This is a longer window
    than PostgreSQL's: run BGREWRITEAOF before a planned restart to keep the marks. The
    record's hash and index entries are kept or lost together. With the default on every
    store, nothing leaves delivered except by another relaxed write (prune_result), so
    nothing is left half-written. Where stores on one server differ in this setting, a
    durable prune after a mark that a restart then loses comes back as the pruned
    record with a stale entry under delivering in the status index as well: listings
    check each record's own status, so it is never listed as delivering, and the entry
    costs one extra fetch when delivering is listed.

    *Why the default is safe.* No guarantee depends on the delivered mark (the table
    marks the transitions that land in delivered non-durable and refuses that for any
    that grants an action or leaves a status answered with execute): a lost mark leaves
    delivering, answered with reconcile-delivery, never execute. What a lost mark costs
    is a redundant redelivery, and such records listed as delivering until an operator or
    the host settles them. Pass True where something outside the protocol reads the
    delivered mark and must never see it regress.

    Replicas: Redis replicates asynchronously. A write acknowledged by the primary can be
    missing on the replica that a failover (Sentinel, Cluster, a managed service)
    promotes, so acknowledged writes can be lost on failover, with the same double
    execution as above. ``WAIT n timeout`` after a write lowers that risk but does not
    remove it (the promoted replica may not be one that acknowledged); this store does
    not call WAIT. For the guarantees, run one primary per slot range with the settings
    above and fail over only by hand, after making sure the new primary holds every
    write (see the README's "Redis Cluster").

    The store owns every key under its prefix; two stores on one database need prefixes
    of which neither begins the other.
    """

    _CLIENT = redis.Redis
    _CLUSTER = redis.cluster.RedisCluster
    _pool: _SyncPool

    @staticmethod
    def _new_client(url: str, socket_timeout: float, connect_timeout: float) -> redis.Redis:
        return _sync_client(url, socket_timeout, connect_timeout)

    def _adopt_cluster(
        self, url: str | None, socket_timeout: float, connect_timeout: float
    ) -> None:
        self._lock = threading.Lock()
        self._connect_timeout_s: object = connect_timeout
        if url is None:
            self._connect_timeout_s = self._client.nodes_manager.connection_kwargs.get(
                "socket_connect_timeout"
            )
            return
        self._client = None

        def build() -> _SyncCluster:
            return _sync_cluster(url, socket_timeout, connect_timeout)

        self._build = build

    @property
    def client(self) -> redis.Redis | redis.cluster.RedisCluster:
        """The redis-py client the store uses (a cluster store built from a URL builds
        its client here, reading the cluster's slot map, if no call did yet)."""
        if self._layout.cluster:
            return cast(redis.cluster.RedisCluster, self._cluster_client())
        client: redis.Redis = self._client
        return client

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if nothing is stored there; return whether it
        inserted. One EVALSHA: the hash and its index entry appear together or not."""
        return self._run(self._layout.create(key, record))

    def get(self, key: str) -> Mapping[str, Any] | None:
        """Return a fresh mapping of the record stored under ``key`` (the JSON text that
        was written, parsed), or None when no hash is there. One HGET.

        Raises CheckpointError INVALID_CHECKPOINT (or UNSUPPORTED_SCHEMA) when the hash
        has no record field or its record is not a valid record (see
        :func:`~tool_execution_checkpoint.stores.decode_stored`)."""
        return self._run(self._layout.get(key))

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        """Replace the record under ``key`` with ``record`` if its stored revision is
        still ``expected_revision``; return whether it did. One EVALSHA that compares,
        writes the record and moves the key between the status indexes."""
        return self._run(self._layout.swap(key, expected_revision, record))

    def clock_us(self) -> int:
        """The server's TIME, in microseconds since the epoch: the clock every write
        stamps its index score with. On a cluster, the earliest of the masters' TIME (one
        per shard, pipelined), so a listing never takes a record for older than its own
        master's clock makes it."""
        return self._run(self._layout.clock())

    def written_us(self, key: str) -> int | None:
        """When the record under ``key`` was last written, on its server's clock (its
        index score), or None when no hash is there or its status indexes it nowhere.
        One read-only script."""
        return self._run(self._layout.written(key))

    def list_records(
        self,
        statuses: Collection[Status],
        *,
        written_before_us: int | None = None,
        after_key: str | None = None,
        limit: int = 1_000,
    ) -> list[RecordSummary | BrokenRecord]:
        """Records in any of ``statuses`` last written before ``written_before_us`` on
        the server's clock (as :meth:`clock_us`), in key order after ``after_key``, at
        most ``limit`` (as :meth:`MemoryStore.list_records`).

        One read-only script per shard (one on a single node, :data:`CLUSTER_SHARDS` on
        a cluster) reads the matching keys of the shard's per-status indexes
        (ZRANGEBYSCORE, O(log N + M) for M matches), the store sorts their union
        (O(M log M)) and fetches the page's records in scripts of up to 256 keys (one
        per shard among them), checking each against the query again. Cost grows with
        M, the records in the asked statuses before the bound, not with the page: it
        suits the operator's questions (records stuck in executing, uncertain or
        delivering), not paging through millions of delivered records. Records that
        change during the call are shown as they are when fetched, or left out if they
        no longer match; a page is shorter than ``limit`` only when no more records
        matched."""
        return self._run(self._layout.list_records(statuses, written_before_us, after_key, limit))

    def check_durability(self, *, on_weak: OnWeak = "raise") -> DurabilityReport:
        """Read the server's persistence settings (CONFIG GET appendonly, appendfsync,
        no-appendfsync-on-rewrite, maxmemory-policy) and judge them; on a cluster, every
        master's (each problem names its master; a setting is reported when all agree).

        Policy: durable means ``appendonly yes``, ``appendfsync always``,
        ``no-appendfsync-on-rewrite no`` and a ``maxmemory-policy`` that is not
        ``allkeys-*``. Otherwise, or when CONFIG GET is refused (managed services often
        disable it), ``on_weak`` decides: ``"raise"`` (default) raises
        :class:`RedisDurabilityError` listing every problem, ``"warn"`` issues a
        :class:`RedisDurabilityWarning` and returns the report, ``"ignore"`` returns it.
        """
        policy = _check_on_weak(on_weak)
        if not self._layout.cluster:
            return _apply_policy(self._run(self._layout.durability()), policy)
        self._refreshed(self._cluster_client())
        primaries = self._cluster_client().get_primaries()
        reports = [(node.name, self._run(self._layout.durability(), node)) for node in primaries]
        return _apply_policy(_merged(reports), policy)

    def close(self) -> None:
        """Close the client if the store built it (from a URL); a client passed in is
        left to its owner."""
        if self._owns_client and self._client is not None:
            self._client.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, operation: _Operation[_T], node: _Node | None = None) -> _T:
        try:
            request = next(operation)
            while True:
                try:
                    if isinstance(request, _Batch):
                        reply: object = self._execute_batch(request)
                    else:
                        reply = self._execute(request, node)
                except StoreError as error:
                    request = operation.throw(error)
                else:
                    request = operation.send(reply)
        except StopIteration as stop:
            result: _T = stop.value
            return result
        finally:
            operation.close()

    def _execute(self, request: _Request, node: _Node | None = None) -> object:
        if not self._layout.cluster:
            return self._send(self._pool, self._where, request)
        cluster = self._refreshed(self._cluster_client())
        manager = cluster.nodes_manager
        asking = False
        target = node
        for _attempt in range(_REDIRECTS):
            if target is None:
                target = self._owner(manager, request)
            pool: Any = cluster.get_redis_connection(target).connection_pool
            try:
                return self._send(pool, target.name, request, asking=asking, redirects=True)
            except MovedError as moved:
                manager.move_slot(moved)
                target, asking = node, False
            except AskError as ask:
                target = manager.get_node(host=ask.host, port=ask.port)
                asking = target is not None
            except TryAgainError:
                time.sleep(0.05)
                target, asking = node, False
            except (RedisUnavailableError, RedisOutcomeUnknownError):
                self._stale = True
                raise
            except RedisCommandError as refused:
                if refused.code == "CLUSTERDOWN":
                    self._stale = True
                raise
        raise _redirected(self._where)

    def _execute_batch(self, batch: _Batch) -> list[object]:
        """Each read of ``batch`` answered, in order. On a cluster the reads are
        pipelined on one connection per master; a read answered with an error (a
        redirect, NOSCRIPT...) did not run and is sent again alone."""
        if not self._layout.cluster or len(batch.requests) < 2:
            return [self._execute(request) for request in batch.requests]
        cluster = self._refreshed(self._cluster_client())
        groups: dict[str, tuple[_Node, list[int]]] = {}
        for position, request in enumerate(batch.requests):
            owner = self._owner(cluster.nodes_manager, request)
            groups.setdefault(owner.name, (owner, []))[1].append(position)
        replies: list[object] = [None] * len(batch.requests)
        again: list[int] = []
        for owner, positions in groups.values():
            pool: Any = cluster.get_redis_connection(owner).connection_pool
            answers = self._pipelined(pool, owner.name, [batch.requests[p] for p in positions])
            for position, answer in zip(positions, answers, strict=True):
                if isinstance(answer, ResponseError):
                    again.append(position)
                else:
                    replies[position] = answer
        for position in again:
            replies[position] = self._execute(batch.requests[position])
        return replies

    def _pipelined(self, pool: _SyncPool, where: str, requests: list[_Request]) -> list[object]:
        """Send the reads, then read every answer (an error answer as its exception)."""
        kwargs = pool.connection_kwargs
        try:
            connection = pool.get_connection()
        except Exception as error:
            self._stale = True
            timeout = kwargs.get("socket_connect_timeout") or kwargs.get("socket_timeout")
            failure = _connect_failure(error, where, timeout)
            if failure is None:
                raise
            raise failure from error
        answers: list[object] = []
        try:
            connection.send_packed_command(_packed(*(request.args for request in requests)))
            for _request in requests:
                try:
                    answers.append(connection.read_response(disable_decoding=True))
                except ResponseError as refused:
                    answers.append(refused)
        except Exception as error:
            self._stale = True
            failure = _exchange_failure(error, requests[0], where, kwargs.get("socket_timeout"))
            if failure is None:
                raise
            raise failure from error
        finally:
            pool.release(connection)
        return answers

    def _send(
        self,
        pool: _SyncPool,
        where: str,
        request: _Request,
        *,
        asking: bool = False,
        redirects: bool = False,
    ) -> object:
        """Send ``request`` once on one connection of ``pool``; a cluster's redirects
        (``redirects``) are raised as redis-py raised them, every other failure as a
        store error."""
        kwargs = pool.connection_kwargs
        try:
            connection = pool.get_connection()
        except Exception as error:
            timeout = kwargs.get("socket_connect_timeout") or kwargs.get("socket_timeout")
            failure = _connect_failure(error, where, timeout)
            if failure is None:
                raise
            raise failure from error
        try:
            if asking:
                connection.send_packed_command(_packed((b"ASKING",)))
                connection.read_response(disable_decoding=True)
            return _exchange(connection, request)
        except Exception as error:
            if redirects and isinstance(error, _REDIRECTS_RAISED):
                raise
            failure = _exchange_failure(error, request, where, kwargs.get("socket_timeout"))
            if failure is None:
                raise
            raise failure from error
        finally:
            pool.release(connection)

    def _cluster_client(self) -> _SyncCluster:
        """The cluster client, built (reading the slot map) on first use."""
        client: _SyncCluster | None = self._client
        if client is not None:
            return client
        with self._lock:
            if self._client is None:
                failure: StoreError | None = None
                try:
                    self._client = self._build()
                except Exception as error:  # redis-py's message may quote the URL
                    failure = _cluster_start_failure(error, self._where, self._connect_timeout_s)
                    if failure is None:
                        raise
                if failure is not None:
                    raise failure
            built: Any = self._client
            return cast(_SyncCluster, built)

    def _refreshed(self, cluster: _SyncCluster) -> _SyncCluster:
        """``cluster``, its slot map read again first when a failure made it stale."""
        if self._stale:
            failure: StoreError | None = None
            try:
                cluster.nodes_manager.initialize()
            except Exception as error:
                failure = _cluster_start_failure(error, self._where, self._connect_timeout_s)
                if failure is None:
                    raise
            if failure is not None:
                raise failure
            self._stale = False
        return cluster


def _exchange(connection: _SyncConnection, request: _Request) -> object:
    """Send the request once and read its reply; after NOSCRIPT (the script did not
    run), load the script and send it once more."""
    connection.send_packed_command(_packed(request.args))
    try:
        return connection.read_response(disable_decoding=True)
    except NoScriptError:
        if request.script is None:
            raise
    connection.send_packed_command(_packed((b"SCRIPT", b"LOAD", request.script.text)))
    connection.read_response(disable_decoding=True)
    connection.send_packed_command(_packed(request.args))
    return connection.read_response(disable_decoding=True)


# --- the asyncio store ----------------------------------------------------------------------


class AsyncRedisStore(_RedisStoreBase[redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster]):
    """The asyncio twin of :class:`RedisStore`, over ``redis.asyncio`` (a
    ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster`` client, or a URL
    as for :class:`RedisStore`): the same layout, scripts, routing, errors and
    guarantees, as coroutines. Use it from one event loop. ``aclose()`` closes a client
    the store built. Cancelling a write after it was sent leaves its outcome unknown,
    like :class:`RedisOutcomeUnknownError`: read back.

    Durability, as for :class:`RedisStore`: the server must run with ``appendonly yes``,
    ``appendfsync always``, ``no-appendfsync-on-rewrite no`` and ``maxmemory-policy
    noeviction``; ``everysec`` can lose about two seconds of acknowledged writes in a
    machine crash, and a failover to an asynchronous replica can lose acknowledged
    writes. :meth:`check_durability` checks the settings. ``synchronous_delivered`` is
    :class:`RedisStore`'s, with the same scripts: by default a delivered mark is not
    appended to the append-only file.
    """

    _CLIENT = redis.asyncio.Redis
    _CLUSTER = redis.asyncio.cluster.RedisCluster
    _pool: _AsyncPool

    @staticmethod
    def _new_client(url: str, socket_timeout: float, connect_timeout: float) -> redis.asyncio.Redis:
        return _async_client(url, socket_timeout, connect_timeout)

    def _adopt_cluster(
        self, url: str | None, socket_timeout: float, connect_timeout: float
    ) -> None:
        self._connect_timeout_s: object = connect_timeout
        self._mapped = False
        if url is None:
            self._connect_timeout_s = self._client.nodes_manager.connection_kwargs.get(
                "socket_connect_timeout"
            )
            return
        self._client = _async_cluster(url, socket_timeout, connect_timeout)

    @property
    def client(self) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster:
        """The redis-py client the store uses."""
        client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster = self._client
        return client

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """See :meth:`RedisStore.create_if_absent`."""
        return await self._run(self._layout.create(key, record))

    async def get(self, key: str) -> Mapping[str, Any] | None:
        """See :meth:`RedisStore.get`."""
        return await self._run(self._layout.get(key))

    async def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        """See :meth:`RedisStore.compare_and_swap`."""
        return await self._run(self._layout.swap(key, expected_revision, record))

    async def clock_us(self) -> int:
        """See :meth:`RedisStore.clock_us`."""
        return await self._run(self._layout.clock())

    async def written_us(self, key: str) -> int | None:
        """See :meth:`RedisStore.written_us`."""
        return await self._run(self._layout.written(key))

    async def list_records(
        self,
        statuses: Collection[Status],
        *,
        written_before_us: int | None = None,
        after_key: str | None = None,
        limit: int = 1_000,
    ) -> list[RecordSummary | BrokenRecord]:
        """See :meth:`RedisStore.list_records`."""
        return await self._run(
            self._layout.list_records(statuses, written_before_us, after_key, limit)
        )

    async def check_durability(self, *, on_weak: OnWeak = "raise") -> DurabilityReport:
        """See :meth:`RedisStore.check_durability`."""
        policy = _check_on_weak(on_weak)
        if not self._layout.cluster:
            return _apply_policy(await self._run(self._layout.durability()), policy)
        cluster = await self._ready()
        reports = [
            (node.name, await self._run(self._layout.durability(), node))
            for node in cluster.get_primaries()
        ]
        return _apply_policy(_merged(reports), policy)

    async def aclose(self) -> None:
        """Close the client if the store built it (from a URL)."""
        if self._owns_client:
            if self._layout.cluster:  # the store read only the slot map: close its nodes
                await self._client.nodes_manager.aclose()
                await self._client.nodes_manager.aclose("startup_nodes")
            await self._client.aclose()

    async def __aenter__(self) -> AsyncRedisStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _run(self, operation: _Operation[_T], node: _AsyncNode | None = None) -> _T:
        try:
            request = next(operation)
            while True:
                try:
                    if isinstance(request, _Batch):
                        reply: object = await self._execute_batch(request)
                    else:
                        reply = await self._execute(request, node)
                except StoreError as error:
                    request = operation.throw(error)
                else:
                    request = operation.send(reply)
        except StopIteration as stop:
            result: _T = stop.value
            return result
        finally:
            operation.close()

    async def _execute(self, request: _Request, node: _AsyncNode | None = None) -> object:
        if not self._layout.cluster:
            return await self._send(self._pool, self._where, request)
        cluster = await self._ready()
        manager = cluster.nodes_manager
        asking = False
        target = node
        for _attempt in range(_REDIRECTS):
            if target is None:
                target = self._owner(manager, request)
            pool = _NodePool(target)
            try:
                return await self._send(pool, target.name, request, asking=asking, redirects=True)
            except MovedError as moved:
                await manager.move_slot(moved)
                target, asking = node, False
            except AskError as ask:
                target = manager.get_node(host=ask.host, port=ask.port)
                asking = target is not None
            except TryAgainError:
                await asyncio.sleep(0.05)
                target, asking = node, False
            except (RedisUnavailableError, RedisOutcomeUnknownError):
                self._stale = True
                raise
            except RedisCommandError as refused:
                if refused.code == "CLUSTERDOWN":
                    self._stale = True
                raise
        raise _redirected(self._where)

    async def _execute_batch(self, batch: _Batch) -> list[object]:
        """See :meth:`RedisStore._execute_batch`."""
        if not self._layout.cluster or len(batch.requests) < 2:
            return [await self._execute(request) for request in batch.requests]
        cluster = await self._ready()
        groups: dict[str, tuple[_AsyncNode, list[int]]] = {}
        for position, request in enumerate(batch.requests):
            owner = self._owner(cluster.nodes_manager, request)
            groups.setdefault(owner.name, (owner, []))[1].append(position)
        replies: list[object] = [None] * len(batch.requests)
        again: list[int] = []
        nodes = list(groups.values())
        pipelines = await asyncio.gather(  # the masters answer at the same time
            *(
                self._pipelined(
                    _NodePool(owner), owner.name, [batch.requests[p] for p in positions]
                )
                for owner, positions in nodes
            )
        )
        for (_owner, positions), answers in zip(nodes, pipelines, strict=True):
            for position, answer in zip(positions, answers, strict=True):
                if isinstance(answer, ResponseError):
                    again.append(position)
                else:
                    replies[position] = answer
        for position in again:
            replies[position] = await self._execute(batch.requests[position])
        return replies

    async def _pipelined(
        self, pool: _AsyncPool, where: str, requests: list[_Request]
    ) -> list[object]:
        """See :meth:`RedisStore._pipelined`."""
        kwargs = pool.connection_kwargs
        try:
            connection = await pool.get_connection()
        except Exception as error:
            self._stale = True
            timeout = kwargs.get("socket_connect_timeout") or kwargs.get("socket_timeout")
            failure = _connect_failure(error, where, timeout)
            if failure is None:
                raise
            raise failure from error
        answers: list[object] = []
        try:
            await connection.send_packed_command(_packed(*(request.args for request in requests)))
            for _request in requests:
                try:
                    answers.append(await connection.read_response(disable_decoding=True))
                except ResponseError as refused:
                    answers.append(refused)
        except Exception as error:
            self._stale = True
            failure = _exchange_failure(error, requests[0], where, kwargs.get("socket_timeout"))
            if failure is None:
                raise
            raise failure from error
        finally:
            await pool.release(connection)
        return answers

    async def _send(
        self,
        pool: _AsyncPool,
        where: str,
        request: _Request,
        *,
        asking: bool = False,
        redirects: bool = False,
    ) -> object:
        """See :meth:`RedisStore._send`."""
        kwargs = pool.connection_kwargs
        try:
            connection = await pool.get_connection()
        except Exception as error:
            timeout = kwargs.get("socket_connect_timeout") or kwargs.get("socket_timeout")
            failure = _connect_failure(error, where, timeout)
            if failure is None:
                raise
            raise failure from error
        try:
            if asking:
                await connection.send_packed_command(_packed((b"ASKING",)))
                await connection.read_response(disable_decoding=True)
            return await _async_exchange(connection, request)
        except Exception as error:
            if redirects and isinstance(error, _REDIRECTS_RAISED):
                raise
            failure = _exchange_failure(error, request, where, kwargs.get("socket_timeout"))
            if failure is None:
                raise
            raise failure from error
        finally:
            await pool.release(connection)

    async def _ready(self) -> _AsyncCluster:
        """The cluster client with its slot map read (again, when a failure made it
        stale). Only the slot map: ``RedisCluster.initialize`` also reads COMMAND (about
        70 ms) for a command parser the store never uses."""
        cluster: _AsyncCluster = self._client
        failure: StoreError | None = None
        try:
            if self._stale or not self._mapped:
                await cluster.nodes_manager.initialize()
                self._mapped = True
        except Exception as error:  # redis-py's message may quote the URL
            failure = _cluster_start_failure(error, self._where, self._connect_timeout_s)
            if failure is None:
                raise
        if failure is not None:
            raise failure
        self._stale = False
        return cluster


async def _async_exchange(connection: _AsyncConnection, request: _Request) -> object:
    """See :func:`_exchange`."""
    await connection.send_packed_command(_packed(request.args))
    try:
        return await connection.read_response(disable_decoding=True)
    except NoScriptError:
        if request.script is None:
            raise
    await connection.send_packed_command(_packed((b"SCRIPT", b"LOAD", request.script.text)))
    await connection.read_response(disable_decoding=True)
    await connection.send_packed_command(_packed(request.args))
    return await connection.read_response(disable_decoding=True)
