"""The scratch space of a Redis URL (see :mod:`tool_execution_checkpoint.testing.scratch`);
needs the ``redis`` extra."""

from __future__ import annotations

from typing import Any, cast

import redis
from redis.exceptions import ResponseError

from ...stores.redis.clients import client_from_url, cluster_from_url
from ...stores.redis.errors import RedisCommandError, RedisUnavailableError, error_code
from ...stores.redis.urls import plain_cluster_url
from . import ScratchSpace

__all__ = ["RedisScratch"]


class RedisScratch(ScratchSpace):
    """Scratch stores for a Redis URL (one server or a cluster): one new key prefix per
    store, ``tec-check-RUN-N:``, and every key matching ``tec-check-RUN-*`` deleted at the
    end (SCAN, then UNLINK; on a cluster, on every master, one key per UNLINK so that no
    command spans slots). The store's Lua scripts stay in the servers' script cache. The
    keys under the URL's own prefix are never read or written."""

    def describe(self) -> str:
        """Which key prefixes are used and deleted."""
        return (
            f"each check gets a new key prefix tec-check-{self.run}-N:, its keys deleted afterwards"
        )

    def location(self, number: int) -> tuple[str, dict[str, Any]]:
        """The URL, with the key prefix of store ``number``."""
        return self.url, {"prefix": f"tec-check-{self.run}-{number}:"}

    def _remove(self) -> str:
        pattern = f"tec-check-{self.run}-*"
        removed = 0
        failure: str | None = None
        code: str | None = None
        plain = plain_cluster_url(self.url)
        try:
            if plain is None:
                client = client_from_url(self.url, 5, 5)
                try:
                    removed = _unlink_matching(client, pattern)
                finally:
                    client.close()
            else:
                cluster = cluster_from_url(plain, 5, 5)
                try:
                    for node in cluster.get_primaries():
                        removed += _unlink_matching(cluster.get_redis_connection(node), pattern)
                finally:
                    cluster.close()
        except (redis.RedisError, ValueError) as error:  # not kept as a context: it may
            failure = type(error).__name__  # quote the URL
            code = error_code(error) if isinstance(error, ResponseError) else None
        if failure is not None:
            message = (
                f"could not delete the keys matching {pattern} ({failure}): delete them by hand"
            )
            if code is not None:
                raise RedisCommandError(message, code)
            raise RedisUnavailableError(message)
        return f"deleted {removed} keys matching {pattern}"


def _unlink_matching(client: redis.Redis, pattern: str) -> int:
    """UNLINK every key of ``client``'s server matching ``pattern``, one key per command
    (in pipelines of 500), so that no command spans two cluster slots; return how many
    were deleted."""
    removed = 0
    pipeline = client.pipeline(transaction=False)
    for number, key in enumerate(client.scan_iter(match=pattern, count=1000), 1):
        pipeline.unlink(key)
        if number % 500 == 0:
            removed += sum(cast(list[int], pipeline.execute()))
    return removed + sum(cast(list[int], pipeline.execute()))
