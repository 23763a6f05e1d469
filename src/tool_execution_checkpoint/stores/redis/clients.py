# Generated from src/tool_execution_checkpoint/stores/redis/clients_async.py
# by tools/async_to_sync.py: do not edit. Edit that module and run
# `python tools/async_to_sync.py` (make lint checks it).
"""redis-py's clients as the Redis store uses them: typed views of a connection, a pool,
a cluster's nodes and its client (as far as the store uses them), a cluster node's pool,
the one exchange of a command, and the builders of clients from URLs.

The store never calls a client's ``execute_command``: it takes one connection from a
pool per operation and sends each command once (docs/stores/redis.md says why). Written
once, for asyncio; ``tools/async_to_sync.py`` generates the synchronous module from the
asyncio one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

import redis
import redis.cluster
from redis.backoff import NoBackoff
from redis.exceptions import MovedError, NoScriptError, ResponseError
from redis.retry import Retry

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

    def send_packed_command(self, command: Sequence[bytes], check_health: bool = ...) -> None: ...

    def read_response(self, disable_decoding: bool = ...) -> object: ...


class Pool(Protocol):
    """A redis-py connection pool, as far as the store uses it."""

    connection_kwargs: dict[str, Any]

    def get_connection(self) -> Connection: ...

    def release(self, connection: Connection) -> None: ...


class Node(Protocol):
    """A cluster node as redis-py's NodesManager keeps it."""

    name: str


class Nodes(Protocol):
    """redis-py's NodesManager: the cluster's slot map."""

    def get_node_from_slot(self, slot: int) -> Node: ...

    def get_node(self, host: str | None = ..., port: int | None = ...) -> Node | None: ...

    def move_slot(self, error: MovedError) -> None: ...

    def initialize(self) -> None: ...


class Cluster(Protocol):
    """redis-py's cluster client, as far as the store uses it."""

    nodes_manager: Nodes

    def get_primaries(self) -> list[Node]: ...

    def close(self) -> None: ...

    def get_redis_connection(self, node: Node) -> redis.Redis: ...


def node_pool(cluster: Cluster, node: Node) -> Pool:
    """The pool of ``node``'s connections, one of ``cluster``'s masters."""
    pool: Any = cluster.get_redis_connection(node).connection_pool
    return cast(Pool, pool)


def put_back(pool: Pool, connection: Connection) -> None:
    """Return ``connection`` to ``pool``. In the asyncio store a cancellation of the
    caller (a second one, while the first unwinds) does not stop the return."""
    pool.release(connection)


def exchange(connection: Connection, request: Request, *, asking: bool = False) -> object:
    """Send ``request`` once (after ASKING, when a cluster's ASK redirect sent it to
    this node) and read its reply; after NOSCRIPT (the script did not run), load the
    script and send it once more (after ASKING again: the server forgets it after one
    command)."""
    _ask(connection, asking)
    connection.send_packed_command(packed(request.args))
    try:
        return connection.read_response(disable_decoding=True)
    except NoScriptError:
        if request.script is None:
            raise
    connection.send_packed_command(packed((b"SCRIPT", b"LOAD", request.script.text)))
    connection.read_response(disable_decoding=True)
    _ask(connection, asking)
    connection.send_packed_command(packed(request.args))
    return connection.read_response(disable_decoding=True)


_SKIP = (b"CLIENT", b"REPLY", b"SKIP")
"""The command that makes the server send no reply to the next one."""

_PROBE = packed(_SKIP, (b"ECHO", b"skipped"), (b"ECHO", b"answered"))


def replies_skippable(connection: Connection) -> bool:
    """Whether the server honours ``CLIENT REPLY SKIP`` on ``connection`` (an ACL, an
    older server or a proxy may refuse or ignore it). Every reply it was sent is read, so
    the connection is left with nothing unread."""
    connection.send_packed_command(_PROBE)
    skipped = True
    for _reply in range(3):  # the refusal, then both ECHOs, at most
        try:
            reply = connection.read_response(disable_decoding=True)
        except ResponseError:
            reply = None
        if reply == b"answered":
            return skipped
        skipped = False
    return False


def post(connection: Connection, request: Request) -> None:
    """Send ``request`` after ``CLIENT REPLY SKIP``, in one buffer, and read nothing: the
    server answers neither (see :func:`replies_skippable`)."""
    connection.send_packed_command(packed(_SKIP, request.args))


def _ask(connection: Connection, asking: bool) -> None:
    """Send ASKING and read its reply, if ``asking``."""
    if asking:
        connection.send_packed_command(packed((b"ASKING",)))
        connection.read_response(disable_decoding=True)


def client_from_url(url: str, socket_timeout: float, connect_timeout: float) -> redis.Redis:
    """A client on one server, for the store to own; nothing is contacted.

    Raises:
        RedisConfigurationError: for a URL redis-py cannot read (the URL is not shown).
    """
    try:
        return redis.Redis.from_url(
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
    client = redis.cluster.RedisCluster.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        retry=Retry(NoBackoff(), 0),
    )
    return cast(Cluster, client)
