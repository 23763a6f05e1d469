"""The Redis stores' sans-I/O half: key names and sharding, each operation as a generator
of the commands it needs (:class:`Request`, :class:`Batch`) that the store's driver
sends, and the reading of their replies. Nothing here does I/O.

A single-node layout has one shard whose keys are ``{prefix}rec:{key}`` and
``{prefix}idx:{status}``; a cluster layout has :data:`CLUSTER_SHARDS` shards whose keys
carry the shard's hash tag, ``{prefix}{{tag}}rec:{key}`` and ``{prefix}{{tag}}idx:{status}``
(docs/stores/redis.md explains why).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ...errors import CheckpointError, ErrorCode
from ...records import Checkpoint
from ...table import Status
from ...validation import check_identifier
from .. import core
from ..core import BrokenRecord, Listing, RecordSummary
from .durability import SETTINGS, DurabilityReport
from .errors import RedisCommandError, RedisOutcomeUnknownError, RedisReplyError, unknown_reply
from .scripts import (
    CANDIDATES,
    CREATE,
    FETCH,
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
    "SHARD_TAGS",
    "Batch",
    "Layout",
    "Operation",
    "Request",
    "packed",
]

DEFAULT_PREFIX = "tec:"

CLUSTER_SHARDS = 16
"""How many shards a cluster store spreads its keys over (fixed: the layout depends on
it; every process on one cluster must agree)."""

SHARD_TAGS = (
    "tec00-0", "tec01-3", "tec02-23", "tec03-20", "tec04-60", "tec05-63", "tec06-40",
    "tec07-43", "tec08-23", "tec09-20", "tec10-10", "tec11-13", "tec12-22", "tec13-21",
    "tec14-1", "tec15-2",
)  # fmt: skip
"""The hash tag of each shard. Tag ``i`` hashes to a slot in ``[1024 i, 1024 (i + 1))``
(CRC16 mod 16384, as Redis computes it), so the shards cover the slot space evenly and a
cluster whose masters own contiguous slot ranges of similar size (what ``redis-cli
--cluster create`` makes) gets a similar number of shards on each master."""

_FETCH_CHUNK = 256
"""How many records one listing round trip fetches at most."""

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Request:
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
class Batch:
    """Reads whose order does not matter, answered as a list in the same order. A
    cluster store pipelines them, one connection per master (the asyncio store asks the
    masters at the same time); a single-node store sends them one by one."""

    requests: tuple[Request, ...]


Operation = Generator[Request | Batch, object, _T]
"""An operation: it yields what to send, is sent each reply (or thrown the store error
that stopped it) and returns its result."""


def packed(*commands: Sequence[bytes]) -> tuple[bytes]:
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


def _call(script: Script, keys: Sequence[bytes], args: Sequence[bytes], *, write: bool) -> Request:
    """EVALSHA of ``script``, routed by its first key."""
    command = (b"EVALSHA", script.sha, str(len(keys)).encode("ascii"), *keys, *args)
    return Request(command, write=write, script=script, route=keys[0])


def _answer(reply: object) -> bool:
    if reply == 1:
        return True
    if reply == 0:
        return False
    raise RedisOutcomeUnknownError(
        "the Redis server gave a reply to a write the store does not understand: it may "
        "or may not have been applied; read the record back and decide again"
    )


class Layout:
    """Key names, argument checks and the operations as generators of requests, under
    ``prefix``, on one node or sharded over a cluster; ``relax`` keeps the swaps the
    host calls non-durable out of the append-only file.

    Raises CheckpointError INVALID_ARGUMENT for a prefix that is not an identifier, or
    that holds ``{`` or ``}`` on a cluster."""

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
            tuple(encoded + b"{" + tag.encode("ascii") + b"}" for tag in SHARD_TAGS)
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
        """The name of ``key``'s hash."""
        return self._records[self.shard_of(key)] + key.encode("utf-8")

    def index_key(self, key: str, status: Status) -> bytes:
        """The index of ``status`` in ``key``'s shard."""
        return self._indexes[self.shard_of(key)][status]

    def shard_indexes(self, shard: int) -> Mapping[Status, bytes]:
        """The per-status indexes of one shard."""
        return self._indexes[shard]

    def create(self, key: str, record: Checkpoint) -> Operation[bool]:
        """Create-if-absent: one write script."""
        encoded = core.encode_create(key, record)
        record = encoded.record
        args = (
            str(record.revision).encode("ascii"),
            record.status.value.encode(),
            encoded.text.encode("utf-8"),
            key.encode("utf-8"),
        )
        keys = (self.record_key(key), self.index_key(key, record.status))
        return _answer((yield _call(CREATE, keys, args, write=True)))

    def swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> Operation[bool]:
        """Compare-and-swap: one write script, relaxed when it is not ``durable`` and the
        layout relaxes."""
        return _answer((yield self.swap_request(key, expected_revision, record, durable)))

    def posted_swap(self, key: str, expected_revision: int, record: Checkpoint) -> Request:
        """The non-durable compare-and-swap as one EVAL of its script's text, for a store
        to send unanswered (after ``CLIENT REPLY SKIP``, which would hide a NOSCRIPT)."""
        request = self.swap_request(key, expected_revision, record, durable=False)
        assert request.script is not None
        command = (b"EVAL", request.script.text, *request.args[2:])
        return Request(command, write=True, route=request.route)

    def swap_request(
        self, key: str, expected_revision: int, record: Checkpoint, durable: bool
    ) -> Request:
        """The compare-and-swap's one EVALSHA (see :meth:`swap`)."""
        encoded = core.encode_swap(key, expected_revision, record)
        record = encoded.record
        args = (
            str(expected_revision).encode("ascii"),
            str(record.revision).encode("ascii"),
            record.status.value.encode(),
            encoded.text.encode("utf-8"),
            key.encode("utf-8"),
        )
        keys = (self.record_key(key), *self._all_indexes[self.shard_of(key)])
        script = SWAP_RELAXED if self.relax and not durable else SWAP
        return _call(script, keys, args, write=True)

    def get(self, key: str) -> Operation[Mapping[str, Any] | None]:
        """The record under ``key``: one HGET, then an EXISTS and a second HGET when it
        finds no record field."""
        core.check_key(key)
        name = self.record_key(key)
        reply = yield Request((b"HGET", name, b"record"), write=False, route=name)
        if reply is None:
            # No record field: an absent key, or a hash without it (broken). The store
            # never deletes a hash, so once EXISTS saw it, a second HGET that still finds
            # no field is a broken record, not one created meanwhile.
            if not (yield Request((b"EXISTS", name), write=False, route=name)):
                return None
            reply = yield Request((b"HGET", name, b"record"), write=False, route=name)
            if reply is None:
                raise CheckpointError(
                    ErrorCode.INVALID_CHECKPOINT, "the record's hash has no record field"
                )
        return _parse_record(reply)

    def clock(self) -> Operation[int]:
        """The server's TIME in microseconds; on a cluster the earliest of the masters'
        (one TIME per shard), so that no record looks older than its own master's clock
        makes it."""
        first = STATUS_ORDER[0]
        times = tuple(
            Request((b"TIME",), write=False, route=indexes[first]) for indexes in self._indexes
        )
        return min(_time_us(reply) for reply in _array((yield Batch(times))))

    def written(self, key: str) -> Operation[int | None]:
        """The index score of ``key``: one read-only script."""
        core.check_key(key)
        keys = (self.record_key(key), *self._all_indexes[self.shard_of(key)])
        reply = yield _call(WRITTEN, keys, (key.encode("utf-8"),), write=False)
        return None if reply is None else _score_us(reply)

    def list_records(self, listing: Listing) -> Operation[list[RecordSummary | BrokenRecord]]:
        """A listing: one read-only script per shard for the candidates, then their
        records fetched in chunks of up to 256 keys (one script per shard among them)."""
        query = core.check_listing(listing)
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
        for reply in _array((yield Batch(shards))):
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
            for group, reply in zip(groups, _array((yield Batch(fetches))), strict=True):
                texts.update(zip(group, _array(reply), strict=True))
            for key in chunk:
                text = texts[key]
                if text is None or text is False:  # Lua's false for a missing hash
                    continue
                line = _listed(key, text, written[key])
                if query.admits(line):
                    found.append(line)
        return found

    def durability(self) -> Operation[DurabilityReport]:
        """The persistence settings of the node the requests are sent to: one CONFIG GET
        per setting."""
        settings: dict[str, str | None] = {}
        try:
            for name in SETTINGS:
                reply = yield Request((b"CONFIG", b"GET", name.encode()), write=False)
                settings[name] = _config_value(reply)
        except RedisCommandError as error:
            return DurabilityReport.unread(error.code)
        return DurabilityReport.of(settings)


def _parse_record(reply: object) -> Mapping[str, Any]:
    """The record a HGET read (see :func:`~tool_execution_checkpoint.stores.decode_stored`)."""
    if not isinstance(reply, bytes):
        raise unknown_reply()
    return core.decode_stored(reply)


def _listed(key: str, text: object, written_us: int) -> RecordSummary | BrokenRecord:
    """The listing line of a record text FETCH read (0: a hash without its record),
    written at ``written_us`` (its index score)."""
    if text == 0:
        missing = CheckpointError(
            ErrorCode.INVALID_CHECKPOINT, "the record's hash has no record field"
        )
        return BrokenRecord.of(key, missing)
    if not isinstance(text, bytes):
        raise unknown_reply()
    return core.listing_line(key, text, written_us=written_us)


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
        raise unknown_reply()
    seconds, micros = (int(cast(bytes, part)) for part in parts)
    return seconds * 1_000_000 + micros


def _config_value(reply: object) -> str | None:
    """The value in a CONFIG GET reply for one name: [name, value] (RESP2) or
    {name: value} (RESP3); None when the server does not know the name."""
    pairs = list(reply.values()) if isinstance(reply, dict) else _array(reply)[1::2]
    return _text(pairs[0]) if len(pairs) == 1 else None


def _array(reply: object) -> list[object]:
    if not isinstance(reply, list):
        raise unknown_reply()
    return reply


def _text(value: object) -> str:
    if not isinstance(value, bytes):
        raise unknown_reply()
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:  # its ``object`` is the value: not kept as a context
        pass
    raise RedisReplyError(
        "the store's index holds a key that is not UTF-8: a foreign value under the store's prefix"
    )
