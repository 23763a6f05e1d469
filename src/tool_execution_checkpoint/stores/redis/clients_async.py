"""redis-py's clients as the Redis store uses them: typed views of a connection, a pool,
a cluster's nodes and its client (as far as the store uses them), a cluster node's pool,
the one exchange of a command, and the builders of clients from URLs.

The store never calls a client's ``execute_command``: it takes one connection from a
pool per operation and sends each command once (docs/stores/redis.md says why). Written
once, for asyncio; ``tools/async_to_sync.py`` generates the synchronous module from the
asyncio one.
"""

from __future__ import annotations

import asyncio  # ASYNC-ONLY
from collections.abc import Sequence
from typing import Any, Protocol, cast

import redis
import redis.asyncio  # ASYNC-ONLY
import redis.asyncio.cluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import MovedError, NoScriptError, ResponseError

from .errors import invalid_url
from .layout import Request, packed

__all__ = [
    "Cluster",
    "Connection",
    "Node",
    "Nodes",
    "Pool",
    "client_from_url",
    "cluster_from_url",
    "exchange",
    "node_pool",
    "post",
    "put_back",
    "replies_skippable",
]


class Connection(Protocol):
    """A redis-py connection, as far as the store uses it."""

    async def send_packed_command(
        self, command: Sequence[bytes], check_health: bool = ...
    ) -> None: ...

    async def read_response(self, disable_decoding: bool = ...) -> object: ...


class Pool(Protocol):
    """A redis-py connection pool, as far as the store uses it."""

    connection_kwargs: dict[str, Any]

    async def get_connection(self) -> Connection: ...

    async def release(self, connection: Connection) -> None: ...


class Node(Protocol):
    """A cluster node as redis-py's NodesManager keeps it."""

    name: str

    if True:  # ASYNC
        connection_kwargs: dict[str, Any]

        def acquire_connection(self) -> Any: ...

        async def disconnect_if_needed(self, connection: Any) -> None: ...

        def release(self, connection: Any) -> None: ...


class Nodes(Protocol):
    """redis-py's NodesManager: the cluster's slot map."""

    def get_node_from_slot(self, slot: int) -> Node: ...

    def get_node(self, host: str | None = ..., port: int | None = ...) -> Node | None: ...

    async def move_slot(self, error: MovedError) -> None: ...

    async def initialize(self) -> None: ...


class Cluster(Protocol):
    """redis-py's cluster client, as far as the store uses it."""

    nodes_manager: Nodes

    def get_primaries(self) -> list[Node]: ...

    async def aclose(self) -> None: ...

    if True:  # ASYNC
        pass  # an asyncio node keeps its connections itself (see node_pool)
    else:

        def get_redis_connection(self, node: Node) -> redis.Redis: ...


if True:  # ASYNC

    class _NodePool:
        """One asyncio cluster node's connections as a :class:`Pool`: a connection
        connected (AUTH, HELLO) before the store sends anything on it."""

        def __init__(self, node: Node) -> None:
            self._node = node
            self.connection_kwargs = node.connection_kwargs

        async def get_connection(self) -> Connection:
            connection = self._node.acquire_connection()
            try:
                await connection.connect()
            except BaseException:
                # Shielded: a second cancellation must not leave it half connected
                # in the node's free list, nor out of it.
                await asyncio.shield(self._dropped(connection))
                raise
            result: Connection = connection
            return result

        async def _dropped(self, connection: Any) -> None:
            try:
                await connection.disconnect()
            finally:
                self._node.release(connection)

        async def release(self, connection: Connection) -> None:
            try:
                await self._node.disconnect_if_needed(connection)
            finally:
                self._node.release(connection)


def node_pool(cluster: Cluster, node: Node) -> Pool:
    """The pool of ``node``'s connections, one of ``cluster``'s masters."""
    if True:  # ASYNC
        return _NodePool(node)  # an asyncio node keeps its connections itself
    pool: Any = cluster.get_redis_connection(node).connection_pool
    return cast(Pool, pool)


async def put_back(pool: Pool, connection: Connection) -> None:
    """Return ``connection`` to ``pool``. In the asyncio store a cancellation of the
    caller (a second one, while the first unwinds) does not stop the return."""
    if True:  # ASYNC
        await asyncio.shield(pool.release(connection))
    else:
        pool.release(connection)


async def exchange(connection: Connection, request: Request, *, asking: bool = False) -> object:
    """Send ``request`` once (after ASKING, when a cluster's ASK redirect sent it to
    this node) and read its reply; after NOSCRIPT (the script did not run), load the
    script and send it once more (after ASKING again: the server forgets it after one
    command)."""
    await _ask(connection, asking)
    await connection.send_packed_command(packed(request.args))
    try:
        return await connection.read_response(disable_decoding=True)
    except NoScriptError:
        if request.script is None:
            raise
    await connection.send_packed_command(packed((b"SCRIPT", b"LOAD", request.script.text)))
    await connection.read_response(disable_decoding=True)
    await _ask(connection, asking)
    await connection.send_packed_command(packed(request.args))
    return await connection.read_response(disable_decoding=True)


_SKIP = (b"CLIENT", b"REPLY", b"SKIP")
"""The command that makes the server send no reply to the next one."""

_PROBE = packed(_SKIP, (b"ECHO", b"skipped"), (b"ECHO", b"answered"))


async def replies_skippable(connection: Connection) -> bool:
    """Whether the server honours ``CLIENT REPLY SKIP`` on ``connection`` (an ACL, an
    older server or a proxy may refuse or ignore it). Every reply it was sent is read, so
    the connection is left with nothing unread."""
    await connection.send_packed_command(_PROBE)
    skipped = True
    for _reply in range(3):  # the refusal, then both ECHOs, at most
        try:
            reply = await connection.read_response(disable_decoding=True)
        except ResponseError:
            reply = None
        if reply == b"answered":
            return skipped
        skipped = False
    return False


async def post(connection: Connection, request: Request) -> None:
    """Send ``request`` after ``CLIENT REPLY SKIP``, in one buffer, and read nothing: the
    server answers neither (see :func:`replies_skippable`)."""
    await connection.send_packed_command(packed(_SKIP, request.args))


async def _ask(connection: Connection, asking: bool) -> None:
    """Send ASKING and read its reply, if ``asking``."""
    if asking:
        await connection.send_packed_command(packed((b"ASKING",)))
        await connection.read_response(disable_decoding=True)


def client_from_url(url: str, socket_timeout: float, connect_timeout: float) -> redis.asyncio.Redis:
    """A client on one server, for the store to own; nothing is contacted.

    Raises:
        RedisConfigurationError: for a URL redis-py cannot read (the URL is not shown).
    """
    try:
        return redis.asyncio.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            retry=Retry(NoBackoff(), 0),
        )
    except (ValueError, TypeError, KeyError):  # may quote the URL: not kept as a context
        pass
    raise invalid_url()


def cluster_from_url(url: str, socket_timeout: float, connect_timeout: float) -> Cluster:
    """A cluster client on the cluster a ``redis://`` URL's node belongs to, for the store
    to own. The asyncio client contacts nothing until its slot map is read; the
    synchronous one reads the slot map (CLUSTER SLOTS) here, and its failures are the
    caller's to translate.

    Raises:
        RedisConfigurationError: for a URL the asyncio client cannot read (the URL is not
            shown).
    """
    if True:  # ASYNC
        try:
            client: Any = redis.asyncio.cluster.RedisCluster.from_url(
                url,
                socket_timeout=socket_timeout,
                socket_connect_timeout=connect_timeout,
                retry=Retry(NoBackoff(), 0),
            )
        except (ValueError, TypeError, KeyError, redis.exceptions.RedisClusterException):
            client = None  # the message may quote the URL: not kept as a context
        if client is None:
            raise invalid_url()
    else:
        client = redis.cluster.RedisCluster.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            retry=Retry(NoBackoff(), 0),
        )
    return cast(Cluster, client)
