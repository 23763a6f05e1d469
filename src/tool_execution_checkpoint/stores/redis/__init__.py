"""RedisStore and AsyncRedisStore: checkpoint stores on a Redis server or a Redis Cluster
(redis-py; install the ``redis`` extra). Needs Redis 7.0 or newer.

docs/stores/redis.md describes the keys, the scripts, the routing on a cluster and what
durability needs. The modules: :mod:`.errors` (the errors and the translation of
redis-py's), :mod:`.scripts` (the Lua), :mod:`.layout` (keys, sharding, the operations
as generators of commands, the replies), :mod:`.durability`, :mod:`.urls`,
:mod:`.clients_async` and :mod:`.store_async` (written for asyncio), and :mod:`.clients`
and :mod:`.store` (generated from them by ``tools/async_to_sync.py``).
"""

from __future__ import annotations

from . import errors
from .durability import DurabilityReport
from .durability import OnWeak as OnWeak
from .errors import *  # noqa: F403 - the names errors.__all__ lists
from .layout import CLUSTER_SHARDS, DEFAULT_PREFIX
from .scripts import SCRIPTS
from .store import RedisStore
from .store_async import AsyncRedisStore
from .urls import DEFAULT_CONNECT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT
from .urls import DEFAULT_SOCKET_TIMEOUT as DEFAULT_SOCKET_TIMEOUT

__all__ = [
    "CLUSTER_SHARDS",
    "DEFAULT_PREFIX",
    "SCRIPTS",
    "AsyncRedisStore",
    "DurabilityReport",
    "RedisStore",
]
__all__ += errors.__all__
