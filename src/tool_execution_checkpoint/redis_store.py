"""RedisStore and AsyncRedisStore: checkpoint stores on a Redis server (redis-py).

Layout, under a prefix (``"tec:"`` by default) that the store owns entirely:

- ``{prefix}rec:{key}``: a hash ``{revision, status, updated_us, record}``, where
  ``record`` is the exact JSON text of :meth:`Checkpoint.to_json` (UTF-8) and the other
  fields are copies the scripts compare and index by;
- ``{prefix}idx:{status}``: one sorted set per status, member = key, score =
  ``updated_us`` (microseconds since the epoch), for :meth:`RedisStore.list_records`.

Every write is one Lua script run with EVALSHA, so Redis runs it atomically:
create-if-absent inserts the hash only if the key does not exist (SET NX semantics) and
adds the key to the index; compare-and-swap compares the stored revision, writes the new
record and moves the key between the per-status indexes. A script that does not report
success changed nothing. Reads are one HGET (then an EXISTS and a second HGET when it
finds no record field: a hash without one is a broken record, not an absent one), or
one read-only script for listings. Every record read goes through
:func:`~tool_execution_checkpoint.store.decode_stored`.

Round trips: create 1, get 1, CAS 1 (plus SCRIPT LOAD and a second EVALSHA once after
the server lost its script cache: a restart, a failover or SCRIPT FLUSH).

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

import hashlib
import os
import warnings
from collections.abc import Collection, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    MaxConnectionsError,
    NoScriptError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from .errors import CheckpointError, ErrorCode
from .records import Checkpoint
from .store import (
    BrokenRecord,
    OutcomeUnknownError,
    RecordSummary,
    StoreError,
    check_create,
    check_key,
    check_listing,
    check_swap,
    decode_stored,
)
from .table import TABLE, Status
from .validation import check_identifier, timestamp_microseconds

__all__ = [
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
    "RedisStore",
    "RedisStoreError",
    "RedisUnavailableError",
    "open_store",
]

DEFAULT_PREFIX = "tec:"
DEFAULT_SOCKET_TIMEOUT = 5.0
"""Seconds a store built from a URL waits for a reply before giving up."""
DEFAULT_CONNECT_TIMEOUT = 2.0
"""Seconds a store built from a URL waits for a connection before giving up."""

_CEILING = TABLE.limits.ceiling_max_payload_bytes
_STATUSES = tuple(Status)
_FETCH_CHUNK = 256
"""How many records one listing round trip fetches at most."""

_T = TypeVar("_T")
OnWeak = Literal["raise", "warn", "ignore"]


# --- errors ----------------------------------------------------------------------------


class RedisStoreError(StoreError):
    """A Redis store operation failed. For a write, read the record back before doing
    anything else (see :class:`StoreError`)."""


class RedisUnavailableError(RedisStoreError):
    """The server could not be reached, did not answer in time, or is still loading its
    data. Raised before a command was sent, or for a read: no write was applied by the
    call that raised it."""


class RedisAuthenticationError(RedisStoreError):
    """The server refused the credentials (wrong or missing password or user name). The
    message never shows the password."""


class RedisConfigurationError(RedisStoreError):
    """The store is configured wrongly: a URL that is not a Redis URL, or a server whose
    settings break the storage contract (see :class:`RedisDurabilityError`)."""


class RedisDurabilityError(RedisConfigurationError):
    """The server's persistence settings do not make an acknowledged write survive a
    crash (raised by ``check_durability`` under the ``"raise"`` policy)."""


class RedisDurabilityWarning(UserWarning):
    """The server's persistence settings are weak (``check_durability(on_weak="warn")``)."""


class RedisCommandError(RedisStoreError):
    """The server answered a command with an error (out of memory, read-only replica,
    missing ACL permission, a foreign value under the store's prefix...). The scripts
    declare themselves with a shebang, so Redis refuses them before they run when it is
    out of memory, read-only or cannot persist: such a refused write changed nothing.
    ``code`` is the server's error code, for example ``"OOM"``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class RedisOutcomeUnknownError(OutcomeUnknownError, RedisStoreError):
    """The connection failed or timed out after a write was sent: the script may or may
    not have run. Read the record back: it is at the old revision (not applied) or is
    exactly the record that was written (applied), never anything in between."""


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
}


def _error_code(error: ResponseError) -> str:
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
        return _command_failure(error, where)
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
class _Script:
    """A Lua script known by its SHA-1 (as redis-py's Script computes it)."""

    text: bytes
    sha: bytes

    @classmethod
    def of(cls, text: str) -> _Script:
        encoded = text.encode("utf-8")
        return cls(encoded, hashlib.sha1(encoded).hexdigest().encode("ascii"))

    def call(self, keys: Sequence[bytes], args: Sequence[bytes], *, write: bool) -> _Request:
        command = (b"EVALSHA", self.sha, str(len(keys)).encode("ascii"), *keys, *args)
        return _Request(command, write=write, script=self)


@dataclass(frozen=True, slots=True)
class _Request:
    """One command to send once. ``write`` says whether a failure after sending leaves
    the outcome unknown; ``script`` is set for EVALSHA, to answer NOSCRIPT."""

    args: tuple[bytes, ...]
    write: bool
    script: _Script | None = None


_Operation = Generator[_Request, object, _T]

# Both write scripts check every key they will write before writing any, so that a
# script that does not return 1 has changed nothing (a foreign value at an index key
# would otherwise fail the script half-way: Redis does not roll scripts back).
_USABLE_INDEX = """
local function usable(index)
  local kind = redis.call('TYPE', index)['ok']
  return kind == 'zset' or kind == 'none'
end
"""

# KEYS[1]: the record's hash; KEYS[2]: the index of its status.
# ARGV: revision, status, updated_us, record JSON, key.
_CREATE = _Script.of(
    "#!lua\n"
    + _USABLE_INDEX
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if not usable(KEYS[2]) then
  return redis.error_reply('WRONGTYPE an index key of the store holds a foreign value')
end
redis.call('HSET', KEYS[1], 'revision', ARGV[1], 'status', ARGV[2],
  'updated_us', ARGV[3], 'record', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[5])
return 1
"""
)

# KEYS[1]: the record's hash; KEYS[2..n]: the index of each status named in ARGV[7..].
# ARGV: expected revision, revision, status, updated_us, record JSON, key, status names.
# Revisions are compared as decimal text: Lua numbers are doubles, revisions go to 2^63-1.
_SWAP = _Script.of(
    "#!lua\n"
    + _USABLE_INDEX
    + """
local stored = redis.call('HMGET', KEYS[1], 'revision', 'status')
if stored[1] ~= ARGV[1] then
  return 0
end
local old_index, new_index = false, false
for i = 2, #KEYS do
  if ARGV[i + 5] == stored[2] then old_index = KEYS[i] end
  if ARGV[i + 5] == ARGV[3] then new_index = KEYS[i] end
end
if not new_index or (old_index and not usable(old_index)) or not usable(new_index) then
  return redis.error_reply('WRONGTYPE an index key of the store holds a foreign value')
end
redis.call('HSET', KEYS[1], 'revision', ARGV[2], 'status', ARGV[3],
  'updated_us', ARGV[4], 'record', ARGV[5])
if old_index then
  redis.call('ZREM', old_index, ARGV[6])
end
redis.call('ZADD', new_index, ARGV[4], ARGV[6])
return 1
"""
)

# KEYS: the indexes to read. ARGV[1]: the highest score to include.
_CANDIDATES = _Script.of(
    """#!lua flags=no-writes
local found = {}
for i = 1, #KEYS do
  local members = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', ARGV[1])
  for j = 1, #members do
    found[#found + 1] = members[j]
  end
end
return found
"""
)

# KEYS: record hashes. Returns their record texts (false where absent, 0 where the hash
# exists without its record field: a broken record, not an absent one).
_FETCH = _Script.of(
    """#!lua flags=no-writes
local found = {}
for i = 1, #KEYS do
  found[i] = redis.call('HGET', KEYS[i], 'record')
  if not found[i] and redis.call('EXISTS', KEYS[i]) == 1 then
    found[i] = 0
  end
end
return found
"""
)

SCRIPTS: Mapping[str, str] = {
    "create": _CREATE.text.decode(),
    "swap": _SWAP.text.decode(),
    "candidates": _CANDIDATES.text.decode(),
    "fetch": _FETCH.text.decode(),
}
"""The Lua sources, for a baseline that runs them without the store (benchmarks)."""


def _answer(reply: object) -> bool:
    if reply == 1:
        return True
    if reply == 0:
        return False
    raise RedisStoreError("the Redis server gave a reply the store does not understand")


def _score_bound(updated_before_us: int | None) -> bytes:
    """The inclusive highest score that can hold a record updated before the bound.

    Scores are doubles, exact only up to 2^53 microseconds (years 1685 to 2255); rounding
    is monotonic, so ``u < b`` implies ``float(u) <= float(b)``: the range is a superset,
    and the exact integer comparison is made on each fetched record."""
    if updated_before_us is None:
        return b"+inf"
    try:
        return repr(float(updated_before_us)).encode("ascii")
    except OverflowError:
        return b"+inf" if updated_before_us > 0 else b"-inf"


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
    """Key names, argument checks and the operations as generators of requests."""

    def __init__(self, prefix: object) -> None:
        self.prefix = check_identifier(prefix, "prefix", ErrorCode.INVALID_ARGUMENT)
        encoded = self.prefix.encode("utf-8")
        self._records = encoded + b"rec:"
        self._indexes = {status: encoded + b"idx:" + status.value.encode() for status in Status}
        self._status_names = tuple(status.value.encode() for status in _STATUSES)
        self._all_indexes = tuple(self._indexes[status] for status in _STATUSES)

    def record_key(self, key: str) -> bytes:
        return self._records + key.encode("utf-8")

    def create(self, key: str, record: Checkpoint) -> _Operation[bool]:
        record = check_create(key, record)
        args = (
            str(record.revision).encode("ascii"),
            record.status.value.encode(),
            str(timestamp_microseconds(record.updated_at)).encode("ascii"),
            record.to_json().encode("utf-8"),
            key.encode("utf-8"),
        )
        keys = (self.record_key(key), self._indexes[record.status])
        return _answer((yield _CREATE.call(keys, args, write=True)))

    def swap(self, key: str, expected_revision: int, record: Checkpoint) -> _Operation[bool]:
        record = check_swap(key, expected_revision, record)
        args = (
            str(expected_revision).encode("ascii"),
            str(record.revision).encode("ascii"),
            record.status.value.encode(),
            str(timestamp_microseconds(record.updated_at)).encode("ascii"),
            record.to_json().encode("utf-8"),
            key.encode("utf-8"),
            *self._status_names,
        )
        keys = (self.record_key(key), *self._all_indexes)
        return _answer((yield _SWAP.call(keys, args, write=True)))

    def get(self, key: str) -> _Operation[Mapping[str, Any] | None]:
        check_key(key)
        name = self.record_key(key)
        reply = yield _Request((b"HGET", name, b"record"), write=False)
        if reply is None:
            # No record field: an absent key, or a hash without it (broken). The store
            # never deletes a hash, so once EXISTS saw it, a second HGET that still finds
            # no field is a broken record, not one created meanwhile.
            if not (yield _Request((b"EXISTS", name), write=False)):
                return None
            reply = yield _Request((b"HGET", name, b"record"), write=False)
            if reply is None:
                raise CheckpointError(
                    ErrorCode.INVALID_CHECKPOINT, "the record's hash has no record field"
                )
        return _parse_record(reply)

    def list_records(
        self,
        statuses: Collection[Status],
        updated_before_us: int | None,
        after_key: str | None,
        limit: int,
    ) -> _Operation[list[RecordSummary | BrokenRecord]]:
        query = check_listing(statuses, updated_before_us, after_key, limit)
        if not query.statuses:
            return []
        before, after = query.updated_before_us, query.after_key
        indexes = tuple(self._indexes[status] for status in _STATUSES if status in query.statuses)
        reply = yield _CANDIDATES.call(indexes, (_score_bound(before),), write=False)
        members = {_text(member) for member in _array(reply)}
        candidates = sorted(member for member in members if after is None or member > after)
        found: list[RecordSummary | BrokenRecord] = []
        position = 0
        while position < len(candidates) and len(found) < query.limit:
            chunk = candidates[position : position + min(query.limit - len(found), _FETCH_CHUNK)]
            position += len(chunk)
            keys = tuple(self.record_key(key) for key in chunk)
            texts = _array((yield _FETCH.call(keys, (), write=False)))
            for key, text in zip(chunk, texts, strict=True):
                if text is None or text is False:  # Lua's false for a missing hash
                    continue
                line = _listed(key, text)
                if isinstance(line, BrokenRecord) or (
                    line.status in query.statuses and (before is None or line.updated_us < before)
                ):
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
    """The record a HGET read (see :func:`~tool_execution_checkpoint.store.decode_stored`)."""
    if not isinstance(reply, bytes):
        raise RedisStoreError("the Redis server gave a reply the store does not understand")
    return decode_stored(reply).mapping


def _listed(key: str, text: object) -> RecordSummary | BrokenRecord:
    """The listing line of a record text _FETCH read (0: a hash without its record)."""
    if text == 0:
        missing = CheckpointError(
            ErrorCode.INVALID_CHECKPOINT, "the record's hash has no record field"
        )
        return BrokenRecord.of(key, missing)
    if not isinstance(text, bytes):
        raise RedisStoreError("the Redis server gave a reply the store does not understand")
    try:
        return RecordSummary.of(key, decode_stored(text).checkpoint)
    except CheckpointError as error:
        return BrokenRecord.of(key, error)


def _config_value(reply: object) -> str | None:
    """The value in a CONFIG GET reply for one name: [name, value] (RESP2) or
    {name: value} (RESP3); None when the server does not know the name."""
    pairs = list(reply.values()) if isinstance(reply, dict) else _array(reply)[1::2]
    return _text(pairs[0]) if len(pairs) == 1 else None


def _array(reply: object) -> list[object]:
    if not isinstance(reply, list):
        raise RedisStoreError("the Redis server gave a reply the store does not understand")
    return reply


def _text(value: object) -> str:
    if not isinstance(value, bytes):
        raise RedisStoreError("the Redis server gave a reply the store does not understand")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:  # its ``object`` is the value: not kept as a context
        pass
    raise RedisStoreError(
        "the store's index holds a key that is not UTF-8: a foreign value under the store's prefix"
    )


# --- redis-py connections, typed as far as the store uses them ----------------------------


class _SyncConnection(Protocol):
    def send_command(self, *args: bytes) -> None: ...

    def read_response(self, disable_decoding: bool = ...) -> object: ...


class _SyncPool(Protocol):
    connection_kwargs: dict[str, Any]

    def get_connection(self) -> _SyncConnection: ...

    def release(self, connection: _SyncConnection) -> None: ...


class _AsyncConnection(Protocol):
    async def send_command(self, *args: bytes) -> None: ...

    async def read_response(self, disable_decoding: bool = ...) -> object: ...


class _AsyncPool(Protocol):
    connection_kwargs: dict[str, Any]

    async def get_connection(self) -> _AsyncConnection: ...

    async def release(self, connection: _AsyncConnection) -> None: ...


def _invalid_url() -> RedisConfigurationError:
    return RedisConfigurationError(
        "the Redis URL is not valid: use redis://[[user]:password@]host[:port][/db], "
        "rediss://... or unix://path (the URL is not shown: it may hold a password)"
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


def _check_url(value: object) -> str:
    if type(value) is not str:
        raise CheckpointError(
            ErrorCode.INVALID_ARGUMENT,
            "must be a redis-py client or a Redis URL string",
            field="client_or_url",
        )
    return value


_ClientT = TypeVar("_ClientT", redis.Redis, redis.asyncio.Redis)


class _RedisStoreBase(Generic[_ClientT]):
    """What both stores take and show: the constructor, :meth:`from_url`, the prefix,
    the client and the repr. Nothing is contacted."""

    _CLIENT: ClassVar[type[Any]]
    """The client class: redis.Redis or redis.asyncio.Redis."""
    _pool: Any

    @staticmethod
    def _new_client(url: str, socket_timeout: float, connect_timeout: float) -> _ClientT:
        """A client of the store's kind on ``url``, owned by the store."""
        raise NotImplementedError

    def __init__(self, client_or_url: _ClientT | str, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._layout = _Layout(prefix)
        self._client: _ClientT
        if isinstance(client_or_url, self._CLIENT):
            self._client = client_or_url
            self._owns_client = False
        else:
            url = _check_url(client_or_url)
            self._client = self._new_client(url, DEFAULT_SOCKET_TIMEOUT, DEFAULT_CONNECT_TIMEOUT)
            self._owns_client = True
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
    ) -> Self:
        """A store on a client built from ``url`` (``redis://``, ``rediss://`` or
        ``unix://``), owned by the store. Nothing is contacted until the first call."""
        store = cls(
            cls._new_client(_check_url(url), socket_timeout, connect_timeout), prefix=prefix
        )
        store._owns_client = True
        return store

    @property
    def prefix(self) -> str:
        """The prefix of every key the store writes."""
        return self._layout.prefix

    @property
    def client(self) -> _ClientT:
        """The redis-py client the store uses."""
        return self._client

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._where}, prefix={self._layout.prefix!r})"


# --- the synchronous store ------------------------------------------------------------------


class RedisStore(_RedisStoreBase[redis.Redis]):
    """A checkpoint store on a Redis server, over a synchronous redis-py client.

    ``RedisStore(client_or_url, *, prefix="tec:")`` takes a ``redis.Redis`` client (the
    store uses its connection pool and does not close it; its retry settings do not
    apply to the store's commands, which are always sent once) or a URL such as
    ``redis://:PASSWORD@127.0.0.1:6379/0`` (the store builds and owns the client, with
    ``socket_timeout`` 5 s and ``socket_connect_timeout`` 2 s unless the URL's query
    sets them). It is safe to share between threads. ``close()`` closes a client the
    store built.

    Contract: ``create_if_absent``, ``get`` and ``compare_and_swap`` as in
    :class:`~tool_execution_checkpoint.store.CheckpointStore`; each write is one atomic
    Lua script (EVALSHA). Bad arguments raise :class:`CheckpointError`
    (INVALID_ARGUMENT); every failure to talk to Redis raises a :class:`StoreError`
    subclass whose message names what to fix and never shows a payload or a password:

    - :class:`RedisUnavailableError`: no connection (refused, timed out, server
      loading); nothing was sent, or the operation was a read;
    - :class:`RedisAuthenticationError`: wrong or missing credentials;
    - :class:`RedisCommandError`: the server answered with an error (OOM, READONLY,
      NOPERM...); the scripts are refused before they run, so nothing was applied;
    - :class:`RedisOutcomeUnknownError` (an :class:`OutcomeUnknownError`): the
      connection failed or timed out after a write was sent. Read the record back: it
      is either unchanged or exactly the record written (which carries the writer's own
      attempt or delivery id), never in between. Never retry the write blindly: a
      landed CAS retried answers False.

    Durability needs the server to run with ``appendonly yes`` and ``appendfsync
    always`` (each write is fsynced to the append-only file before Redis replies), with
    ``no-appendfsync-on-rewrite no`` and a ``maxmemory-policy`` that never evicts the
    store's keys (``noeviction``). With ``appendfsync everysec`` a crash of the machine
    (or of the server while the disk is slow) can lose about the last two seconds of
    acknowledged writes: a won claim may vanish, the record comes back as ready and the
    tool runs twice. With ``appendonly no`` every write since the last snapshot is
    lost. :meth:`check_durability` reads these settings and raises, warns or reports.

    Replicas: Redis replicates asynchronously. A write acknowledged by the primary can be
    missing on the replica that a failover (Sentinel, Cluster, a managed service)
    promotes, so acknowledged writes can be lost on failover, with the same double
    execution as above. ``WAIT n timeout`` after a write lowers that risk but does not
    remove it (the promoted replica may not be one that acknowledged); this store does
    not call WAIT. For the guarantees, run one primary with the settings above and fail
    over only by hand, after making sure the new primary holds every write. Redis
    Cluster is not supported (the scripts touch index keys in other slots).

    The store owns every key under its prefix; two stores on one database need prefixes
    of which neither begins the other.
    """

    _CLIENT = redis.Redis
    _pool: _SyncPool

    @staticmethod
    def _new_client(url: str, socket_timeout: float, connect_timeout: float) -> redis.Redis:
        return _sync_client(url, socket_timeout, connect_timeout)

    def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if nothing is stored there; return whether it
        inserted. One EVALSHA: the hash and its index entry appear together or not."""
        return self._run(self._layout.create(key, record))

    def get(self, key: str) -> Mapping[str, Any] | None:
        """Return a fresh mapping of the record stored under ``key`` (the JSON text that
        was written, parsed), or None when no hash is there. One HGET.

        Raises CheckpointError INVALID_CHECKPOINT (or UNSUPPORTED_SCHEMA) when the hash
        has no record field or its record is not a valid record (see
        :func:`~tool_execution_checkpoint.store.decode_stored`)."""
        return self._run(self._layout.get(key))

    def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        """Replace the record under ``key`` with ``record`` if its stored revision is
        still ``expected_revision``; return whether it did. One EVALSHA that compares,
        writes the record and moves the key between the status indexes."""
        return self._run(self._layout.swap(key, expected_revision, record))

    def list_records(
        self,
        statuses: Collection[Status],
        *,
        updated_before_us: int | None = None,
        after_key: str | None = None,
        limit: int = 1_000,
    ) -> list[RecordSummary | BrokenRecord]:
        """Records in any of ``statuses`` last updated before ``updated_before_us``, in
        key order after ``after_key``, at most ``limit`` (as
        :meth:`MemoryStore.list_records`).

        One read-only script reads the matching keys of the per-status indexes
        (ZRANGEBYSCORE, O(log N + M) for M matches), the store sorts them (O(M log M))
        and fetches the page's records in scripts of up to 256 keys, checking each
        against the query again. Cost grows with M, the records in the asked statuses
        before the bound, not with the page: it suits the operator's questions (records
        stuck in executing, uncertain or delivering), not paging through millions of
        delivered records. Records that change during the call are shown as they are
        when fetched, or left out if they no longer match; a page is shorter than
        ``limit`` only when no more records matched."""
        return self._run(self._layout.list_records(statuses, updated_before_us, after_key, limit))

    def check_durability(self, *, on_weak: OnWeak = "raise") -> DurabilityReport:
        """Read the server's persistence settings (CONFIG GET appendonly, appendfsync,
        no-appendfsync-on-rewrite, maxmemory-policy) and judge them.

        Policy: durable means ``appendonly yes``, ``appendfsync always``,
        ``no-appendfsync-on-rewrite no`` and a ``maxmemory-policy`` that is not
        ``allkeys-*``. Otherwise, or when CONFIG GET is refused (managed services often
        disable it), ``on_weak`` decides: ``"raise"`` (default) raises
        :class:`RedisDurabilityError` listing every problem, ``"warn"`` issues a
        :class:`RedisDurabilityWarning` and returns the report, ``"ignore"`` returns it.
        """
        policy = _check_on_weak(on_weak)
        return _apply_policy(self._run(self._layout.durability()), policy)

    def close(self) -> None:
        """Close the client if the store built it (from a URL); a client passed in is
        left to its owner."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _run(self, operation: _Operation[_T]) -> _T:
        try:
            request = next(operation)
            while True:
                try:
                    reply = self._execute(request)
                except StoreError as error:
                    request = operation.throw(error)
                else:
                    request = operation.send(reply)
        except StopIteration as stop:
            result: _T = stop.value
            return result
        finally:
            operation.close()

    def _execute(self, request: _Request) -> object:
        pool = self._pool
        try:
            connection = pool.get_connection()
        except Exception as error:
            failure = _connect_failure(error, self._where, self._connect_timeout())
            if failure is None:
                raise
            raise failure from error
        try:
            return _exchange(connection, request)
        except Exception as error:
            failure = _exchange_failure(error, request, self._where, self._socket_timeout())
            if failure is None:
                raise
            raise failure from error
        finally:
            pool.release(connection)

    def _socket_timeout(self) -> object:
        return self._pool.connection_kwargs.get("socket_timeout")

    def _connect_timeout(self) -> object:
        kwargs = self._pool.connection_kwargs
        return kwargs.get("socket_connect_timeout") or kwargs.get("socket_timeout")


def _exchange(connection: _SyncConnection, request: _Request) -> object:
    """Send the request once and read its reply; after NOSCRIPT (the script did not
    run), load the script and send it once more."""
    connection.send_command(*request.args)
    try:
        return connection.read_response(disable_decoding=True)
    except NoScriptError:
        if request.script is None:
            raise
    connection.send_command(b"SCRIPT", b"LOAD", request.script.text)
    connection.read_response(disable_decoding=True)
    connection.send_command(*request.args)
    return connection.read_response(disable_decoding=True)


# --- the asyncio store ----------------------------------------------------------------------


class AsyncRedisStore(_RedisStoreBase[redis.asyncio.Redis]):
    """The asyncio twin of :class:`RedisStore`, over ``redis.asyncio``: the same layout,
    scripts, errors and guarantees, as coroutines. Use it from one event loop.
    ``aclose()`` closes a client the store built. Cancelling a write after it was sent
    leaves its outcome unknown, like :class:`RedisOutcomeUnknownError`: read back.

    Durability, as for :class:`RedisStore`: the server must run with ``appendonly yes``,
    ``appendfsync always``, ``no-appendfsync-on-rewrite no`` and ``maxmemory-policy
    noeviction``; ``everysec`` can lose about two seconds of acknowledged writes in a
    machine crash, and a failover to an asynchronous replica can lose acknowledged
    writes. :meth:`check_durability` checks the settings.
    """

    _CLIENT = redis.asyncio.Redis
    _pool: _AsyncPool

    @staticmethod
    def _new_client(url: str, socket_timeout: float, connect_timeout: float) -> redis.asyncio.Redis:
        return _async_client(url, socket_timeout, connect_timeout)

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """See :meth:`RedisStore.create_if_absent`."""
        return await self._run(self._layout.create(key, record))

    async def get(self, key: str) -> Mapping[str, Any] | None:
        """See :meth:`RedisStore.get`."""
        return await self._run(self._layout.get(key))

    async def compare_and_swap(self, key: str, expected_revision: int, record: Checkpoint) -> bool:
        """See :meth:`RedisStore.compare_and_swap`."""
        return await self._run(self._layout.swap(key, expected_revision, record))

    async def list_records(
        self,
        statuses: Collection[Status],
        *,
        updated_before_us: int | None = None,
        after_key: str | None = None,
        limit: int = 1_000,
    ) -> list[RecordSummary | BrokenRecord]:
        """See :meth:`RedisStore.list_records`."""
        return await self._run(
            self._layout.list_records(statuses, updated_before_us, after_key, limit)
        )

    async def check_durability(self, *, on_weak: OnWeak = "raise") -> DurabilityReport:
        """See :meth:`RedisStore.check_durability`."""
        policy = _check_on_weak(on_weak)
        return _apply_policy(await self._run(self._layout.durability()), policy)

    async def aclose(self) -> None:
        """Close the client if the store built it (from a URL)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> AsyncRedisStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _run(self, operation: _Operation[_T]) -> _T:
        try:
            request = next(operation)
            while True:
                try:
                    reply = await self._execute(request)
                except StoreError as error:
                    request = operation.throw(error)
                else:
                    request = operation.send(reply)
        except StopIteration as stop:
            result: _T = stop.value
            return result
        finally:
            operation.close()

    async def _execute(self, request: _Request) -> object:
        pool = self._pool
        kwargs = pool.connection_kwargs
        try:
            connection = await pool.get_connection()
        except Exception as error:
            timeout = kwargs.get("socket_connect_timeout") or kwargs.get("socket_timeout")
            failure = _connect_failure(error, self._where, timeout)
            if failure is None:
                raise
            raise failure from error
        try:
            return await _async_exchange(connection, request)
        except Exception as error:
            failure = _exchange_failure(error, request, self._where, kwargs.get("socket_timeout"))
            if failure is None:
                raise
            raise failure from error
        finally:
            await pool.release(connection)


async def _async_exchange(connection: _AsyncConnection, request: _Request) -> object:
    """See :func:`_exchange`."""
    await connection.send_command(*request.args)
    try:
        return await connection.read_response(disable_decoding=True)
    except NoScriptError:
        if request.script is None:
            raise
    await connection.send_command(b"SCRIPT", b"LOAD", request.script.text)
    await connection.read_response(disable_decoding=True)
    await connection.send_command(*request.args)
    return await connection.read_response(disable_decoding=True)


def open_store(url: str) -> RedisStore:
    """A :class:`RedisStore` on ``url`` with the default prefix: the factory a process
    worker names as ``"tool_execution_checkpoint.redis_store:open_store"``."""
    return RedisStore.from_url(url)
