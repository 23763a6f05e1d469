"""The Lua scripts of the Redis stores, each known by its SHA-1, and the bounds of their
index ranges (docs/stores/redis.md explains the layout they work on).

The index score of a record is the time of its last write on the server's clock: the
write scripts read ``TIME`` and store it, whatever the writer's clock put in the record's
``updatedAt``. Keys written by earlier versions of this library may have that
``updatedAt`` as their score instead: they are aged by it until their next write (and
their hashes may keep an ``updated_us`` field, which nothing reads).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from ...table import Status

__all__ = [
    "CANDIDATES",
    "CREATE",
    "FETCH",
    "SCRIPTS",
    "STATUS_ORDER",
    "SWAP",
    "SWAP_RELAXED",
    "WRITTEN",
    "Script",
    "score_bound",
]

STATUS_ORDER = tuple(Status)
"""The statuses in the order of the index keys a swap and :data:`WRITTEN` are passed."""


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script known by its SHA-1 (as redis-py's Script computes it)."""

    text: bytes
    sha: bytes

    @classmethod
    def of(cls, text: str) -> Script:
        encoded = text.encode("utf-8")
        return cls(encoded, hashlib.sha1(encoded).hexdigest().encode("ascii"))


# A script that does not return 1 has changed nothing: Redis does not roll a script back,
# so the first command that can fail (a foreign value at one of the store's keys:
# WRONGTYPE) comes before any write. The record's hash is read first (EXISTS, HMGET) and
# the index written next, so a foreign value there fails the script at its first write;
# the hash, written last, was read and is absent or a hash. The one index a swap touches
# after its first write, the old status's, is checked before it (TYPE).
_USABLE_INDEX = """
local function usable(index)
  local kind = redis.call('TYPE', index)['ok']
  return kind == 'zset' or kind == 'none'
end
"""

# The server's time now, in microseconds since the epoch, as decimal text (exact: Lua's
# numbers are doubles, and the text is what ZADD parses).
_NOW = """
local function now()
  local time = redis.call('TIME')
  return time[1] .. string.format('%06d', tonumber(time[2]))
end
"""

# KEYS[1]: the record's hash; KEYS[2]: the index of its status.
# ARGV: revision, status, record JSON, key.
CREATE = Script.of(
    "#!lua\n"
    + _NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('ZADD', KEYS[2], now(), ARGV[4])
redis.call('HSET', KEYS[1], 'revision', ARGV[1], 'status', ARGV[2], 'record', ARGV[3])
return 1
"""
)

# The status names, in the order of the index keys a swap passes, written into the
# script's text (they are plain identifiers, safe between Lua quotes) rather than sent
# with every swap.
_LUA_STATUSES = (
    "local statuses = {" + ", ".join(f"'{status.value}'" for status in STATUS_ORDER) + "}\n"
)

# KEYS[1]: the record's hash; KEYS[i + 1]: the index of the status statuses[i].
# ARGV: expected revision, revision, status, record JSON, key.
# Revisions are compared as decimal text: Lua numbers are doubles, revisions go to 2^63-1.
# The reading part (the compare, the indexes of the stored and the new status) is the one
# earlier versions ran.
_SWAP_READ = """
local stored = redis.call('HMGET', KEYS[1], 'revision', 'status')
if stored[1] ~= ARGV[1] then
  return 0
end
local old_index, new_index = false, false
for i, name in ipairs(statuses) do
  if name == stored[2] then old_index = KEYS[i + 1] end
  if name == ARGV[3] then new_index = KEYS[i + 1] end
end
"""
_SWAP_BODY = (
    _SWAP_READ
    + """if old_index == new_index then
  old_index = false
end
if not new_index or (old_index and not usable(old_index)) then
  return redis.error_reply('WRONGTYPE an index key of the store holds a foreign value')
end
redis.call('ZADD', new_index, now(), ARGV[5])
if old_index then
  redis.call('ZREM', old_index, ARGV[5])
end
redis.call('HSET', KEYS[1], 'revision', ARGV[2], 'status', ARGV[3], 'record', ARGV[4])
return 1
"""
)
SWAP = Script.of("#!lua\n" + _USABLE_INDEX + _NOW + _LUA_STATUSES + _SWAP_BODY)
# The relaxed swap is the same script, its effects sent to replicas but not appended to
# the append-only file: nothing waits for an fsync of it (docs/stores/redis.md, "Delivered
# marks"). set_repl comes first, before any write, so all of the script's effects go
# alike: the record's hash and its index entries are kept, or lost, together.
SWAP_RELAXED = Script.of(
    "#!lua\nredis.set_repl(redis.REPL_REPLICA)\n"
    + _USABLE_INDEX
    + _NOW
    + _LUA_STATUSES
    + _SWAP_BODY
)

# KEYS: the indexes to read. ARGV[1]: the highest score to include. Returns the members
# and their scores (the times of their last writes), one after the other.
CANDIDATES = Script.of(
    """#!lua flags=no-writes
local found = {}
for i = 1, #KEYS do
  local members = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', ARGV[1], 'WITHSCORES')
  for j = 1, #members do
    found[#found + 1] = members[j]
  end
end
return found
"""
)

# KEYS: record hashes. Returns their record texts (false where absent, 0 where the hash
# exists without its record field: a broken record, not an absent one).
FETCH = Script.of(
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

# KEYS[1]: the record's hash; KEYS[i + 1]: the index of the status statuses[i].
# ARGV[1]: the key. Returns the key's score in the index of its hash's status (the time of
# its last write), or false.
WRITTEN = Script.of(
    "#!lua flags=no-writes\n"
    + _LUA_STATUSES
    + """
local status = redis.call('HGET', KEYS[1], 'status')
for i, name in ipairs(statuses) do
  if name == status then
    return redis.call('ZSCORE', KEYS[i + 1], ARGV[1])
  end
end
return false
"""
)

SCRIPTS: Mapping[str, str] = {
    "create": CREATE.text.decode(),
    "swap": SWAP.text.decode(),
    "swap_relaxed": SWAP_RELAXED.text.decode(),
    "candidates": CANDIDATES.text.decode(),
    "fetch": FETCH.text.decode(),
    "written": WRITTEN.text.decode(),
}
"""The Lua sources, for a baseline that runs them without the store (benchmarks)."""


def score_bound(written_before_us: int | None) -> bytes:
    """The inclusive highest score that can hold a record written before the bound.

    Scores are doubles, exact only up to 2^53 microseconds (years 1685 to 2255); rounding
    is monotonic, so ``u < b`` implies ``float(u) <= float(b)``: the range is a superset,
    and the exact integer comparison is made on each score read."""
    if written_before_us is None:
        return b"+inf"
    try:
        return repr(float(written_before_us)).encode("ascii")
    except OverflowError:
        return b"+inf" if written_before_us > 0 else b"-inf"
