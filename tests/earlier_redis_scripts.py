"""The write scripts of RedisStore before #36, byte for byte, and their calls: what a database
written by an earlier version holds, for the tests that read, list and swap such records
with today's store (test_redis_scripts.py) and for the "before #36" variant of
benchmarks/redis_writes.py.

Each wrote a hash ``{revision, status, updated_us, record}`` and scored the key in its
status's index with the server's TIME, after a TYPE check of every index it wrote.
"""

from __future__ import annotations

from typing import cast

import redis

from tool_execution_checkpoint import Checkpoint
from tool_execution_checkpoint.stores.redis import scripts
from tool_execution_checkpoint.validation import timestamp_microseconds

__all__ = ["CREATE", "SHAS", "SWAP", "earlier_create", "earlier_swap"]

# Built from the fragments of scripts.py that they share with today's scripts (the
# preludes, the status names, the swap's reading part); SHAS pins the result.
_PRELUDE = "#!lua\n" + scripts._USABLE_INDEX + scripts._NOW

CREATE = (
    _PRELUDE
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
if not usable(KEYS[2]) then
  return redis.error_reply('WRONGTYPE an index key of the store holds a foreign value')
end
redis.call('HSET', KEYS[1], 'revision', ARGV[1], 'status', ARGV[2],
  'updated_us', ARGV[3], 'record', ARGV[4])
redis.call('ZADD', KEYS[2], now(), ARGV[5])
return 1
"""
)
"""KEYS: the hash, its status's index. ARGV: revision, status, updated_us, record, key."""

SWAP = (
    _PRELUDE
    + scripts._LUA_STATUSES
    + scripts._SWAP_READ
    + """if not new_index or (old_index and not usable(old_index)) or not usable(new_index) then
  return redis.error_reply('WRONGTYPE an index key of the store holds a foreign value')
end
redis.call('HSET', KEYS[1], 'revision', ARGV[2], 'status', ARGV[3],
  'updated_us', ARGV[4], 'record', ARGV[5])
if old_index then
  redis.call('ZREM', old_index, ARGV[6])
end
redis.call('ZADD', new_index, now(), ARGV[6])
return 1
"""
)
"""KEYS: the hash, then the index of each status in the order of ``statuses``. ARGV:
expected revision, revision, status, updated_us, record, key."""


def _index(prefix: str, status: str) -> str:
    return f"{prefix}idx:{status}"


def earlier_create(client: redis.Redis, prefix: str, key: str, record: Checkpoint) -> bool:
    """Create-if-absent as an earlier version did it, on the single-node layout."""
    keys = [f"{prefix}rec:{key}", _index(prefix, record.status.value)]
    args = [
        record.revision,
        record.status.value,
        timestamp_microseconds(record.updated_at),
        record.to_json(),
        key,
    ]
    return cast(int, client.eval(CREATE, len(keys), *keys, *args)) == 1


def earlier_swap(
    client: redis.Redis, prefix: str, key: str, expected_revision: int, record: Checkpoint
) -> bool:
    """Compare-and-swap as an earlier version did it, on the single-node layout."""
    keys = [
        f"{prefix}rec:{key}",
        *(_index(prefix, status.value) for status in scripts.STATUS_ORDER),
    ]
    args = [
        expected_revision,
        record.revision,
        record.status.value,
        timestamp_microseconds(record.updated_at),
        record.to_json(),
        key,
    ]
    return cast(int, client.eval(SWAP, len(keys), *keys, *args)) == 1


SHAS = {
    "create": "260d2523e74ec9a1030dd20dcd78e7f55c5b2964",
    "swap": "3ff8c3927f5e7dd6299afdf488b382207b3504c5",
}
"""The SHA-1s the earlier store ran the scripts by (its ``Script.sha``): the texts here
are those, byte for byte."""
