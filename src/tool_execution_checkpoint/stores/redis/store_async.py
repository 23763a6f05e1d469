"""The Redis store's driver: :class:`AsyncRedisStore` sends the commands of the layout's
operations (:mod:`.layout`), each once, routing them on a Redis Cluster.

The driver is written once, for asyncio; ``tools/async_to_sync.py`` generates the
synchronous module from the asyncio one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

import redis
import redis.asyncio  # ASYNC-ONLY
import redis.asyncio.cluster
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    MovedError,
    RedisClusterException,
    ResponseError,
    TryAgainError,
)

from ...records import Checkpoint
from ...validation import check_flag
from ..core import BrokenRecord, Listing, RecordSummary, StoreError
from .clients_async import (
    Cluster,
    Node,
    Nodes,
    Pool,
    client_from_url,
    cluster_from_url,
    exchange,
    node_pool,
    post,
    put_back,
    replies_skippable,
)
from .durability import DurabilityReport, OnWeak, apply_policy, check_on_weak, merged
from .errors import (
    RedisCommandError,
    RedisOutcomeUnknownError,
    RedisReplyError,
    RedisUnavailableError,
    cluster_start_failure,
    connect_failure,
    exchange_failure,
    not_covered,
    redirected,
)
from .layout import DEFAULT_PREFIX, Batch, Layout, Operation, Request, packed
from .urls import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_SOCKET_TIMEOUT,
    address,
    check_url,
    cluster_seed,
    plain_cluster_url,
)

if True:  # ASYNC
    import asyncio
else:
    import functools
    import threading
    import time
    from collections.abc import Callable

__all__ = ["AsyncRedisStore"]

_REDIRECTS = 5
"""How many times a cluster store sends a command that was answered MOVED, ASK or
TRYAGAIN (each such answer means the command did not run) before giving up."""

_REDIRECTS_RAISED = (AskError, TryAgainError)  # MovedError is an AskError

_T = TypeVar("_T")


class AsyncRedisStore:
    """A checkpoint store on a Redis server or a Redis Cluster, over redis-py.

    ``AsyncRedisStore(client_or_url, *, prefix="tec:", synchronous_delivered=False)``
    takes a ``redis.asyncio.Redis`` client (the store uses its connection pool and does
    not close it; its retry settings do not apply to the store's commands, which are
    always sent once), a ``redis.asyncio.cluster.RedisCluster`` client (the store uses
    its slot map and node pools, never its ``execute_command``), or a URL (see
    :meth:`from_url`: the store builds and owns the client). ``aclose()`` closes a
    client the store built. The synchronous store is safe to share between threads; the
    asyncio store is used from one event loop, and cancelling one of its writes after it
    was sent leaves the write's outcome unknown, as :class:`RedisOutcomeUnknownError`
    does.

    Contract: the operations of
    :class:`~tool_execution_checkpoint.stores.OperableCheckpointStore`; each write is one
    atomic Lua script (EVALSHA), a record's hash and its index entries written together
    or not at all. Bad arguments raise :class:`CheckpointError` (INVALID_ARGUMENT); every
    failure to talk to Redis raises a :class:`StoreError` subclass whose message names
    what to fix and never shows a payload or a password:

    - :class:`RedisUnavailableError`: no connection (refused, timed out, server
      loading, no master for the slot, redirected too often); nothing was sent, or the
      operation was a read, or the cluster answered that the command did not run;
    - :class:`RedisAuthenticationError`: wrong or missing credentials;
    - :class:`RedisCommandError`: the server answered with an error (OOM, READONLY,
      NOPERM, CLUSTERDOWN, CROSSSLOT...); the scripts are refused before they run, so
      nothing was applied;
    - :class:`RedisOutcomeUnknownError` (an :class:`OutcomeUnknownError`): the
      connection failed or timed out after a write was sent. Read the record back: it
      is either unchanged or exactly the record written, never in between. Never retry
      the write blindly: a landed CAS retried answers False.

    On a cluster, each command goes to the master that owns its slot in redis-py's slot
    map. A MOVED answer updates the map, an ASK answer sends ``ASKING`` first to the
    named node, TRYAGAIN waits 50 ms: each means the command did not run, and it is sent
    again, at most 5 times in all. A refused or lost connection marks the map stale: the
    next operation reads it again first.

    Durability needs the server (every master of a cluster) to run with ``appendonly
    yes``, ``appendfsync always``, ``no-appendfsync-on-rewrite no`` and a
    ``maxmemory-policy`` that never evicts (:meth:`check_durability` reads them). By
    default a swap the host calls non-durable (``durable=False``: the delivered mark, a
    pruning) is kept out of the append-only file, so a restart may bring its record back
    as it was before (delivering, or delivered with its payload), never as anything
    answered with execute; ``synchronous_delivered=True`` appends it too.
    Replication is asynchronous: a failover can lose acknowledged writes.
    docs/stores/redis.md explains each of these.

    The store owns every key under its prefix; two stores on one database need prefixes
    of which neither begins the other.
    """

    _layout: Layout
    _client: Any
    _pool: Pool

    def __init__(
        self,
        client_or_url: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster | str,
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
        Redis Cluster. The URL's query may set the timeouts instead. Nothing is contacted
        until the first call. ``prefix`` and ``synchronous_delivered`` are the
        constructor's.

        Raises:
            RedisConfigurationError: for a URL that is not a Redis URL (not shown).
            CheckpointError: INVALID_ARGUMENT for a bad prefix or flag.
        """
        store = cls.__new__(cls)
        store._setup(check_url(url), prefix, socket_timeout, connect_timeout, synchronous_delivered)
        return store

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
        self._posting: bool | None = None  # whether CLIENT REPLY SKIP is honoured
        relax = not check_flag(synchronous_delivered, "synchronous_delivered")
        if isinstance(client_or_url, redis.asyncio.cluster.RedisCluster):
            self._layout = Layout(prefix, cluster=True, relax=relax)
            self._client = client_or_url
            startup = list(getattr(client_or_url.nodes_manager, "startup_nodes", {}))
            self._where = startup[0] if startup else "a Redis Cluster"
            self._adopt_cluster(None, socket_timeout, connect_timeout)
            return
        if isinstance(client_or_url, redis.asyncio.Redis):
            self._layout = Layout(prefix, relax=relax)
            self._client = client_or_url
        else:
            url = check_url(client_or_url)
            plain = plain_cluster_url(url)
            self._layout = Layout(prefix, cluster=plain is not None, relax=relax)
            self._owns_client = True
            if plain is not None:
                self._where = cluster_seed(plain)
                self._adopt_cluster(plain, socket_timeout, connect_timeout)
                return
            self._client = client_from_url(url, socket_timeout, connect_timeout)
        self._pool = self._client.connection_pool
        self._where = address(self._pool.connection_kwargs)

    def _adopt_cluster(
        self, url: str | None, socket_timeout: float, connect_timeout: float
    ) -> None:
        """Keep the cluster client passed in (``url`` None, in ``_client``) or arrange
        one on ``url``."""
        self._connect_timeout_s: object = connect_timeout
        if True:  # ASYNC
            self._mapped = False  # the asyncio client reads the slot map when initialized
        else:
            self._mapped = True  # the synchronous client reads it when built
            self._lock = threading.Lock()
        if url is None:
            self._connect_timeout_s = self._client.nodes_manager.connection_kwargs.get(
                "socket_connect_timeout"
            )
            return
        if True:  # ASYNC
            self._client = cluster_from_url(url, socket_timeout, connect_timeout)
        else:
            self._client = None  # it reads the slot map when built: built on first use
            self._build: Callable[[], Cluster] = functools.partial(
                cluster_from_url, url, socket_timeout, connect_timeout
            )

    @property
    def prefix(self) -> str:
        """The prefix of every key the store writes."""
        return self._layout.prefix

    @property
    def cluster(self) -> bool:
        """Whether the store is on a Redis Cluster (hash-tagged, sharded layout)."""
        return self._layout.cluster

    @property
    def client(self) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster:
        """The redis-py client the store uses (a synchronous cluster store built from a
        URL builds its client here, reading the cluster's slot map, if no call did yet)."""
        if self._layout.cluster:
            return cast(redis.asyncio.cluster.RedisCluster, self._built())
        client: redis.asyncio.Redis = self._client
        return client

    async def create_if_absent(self, key: str, record: Checkpoint) -> bool:
        """Insert ``record`` under ``key`` if nothing is stored there; return whether it
        inserted. One EVALSHA: the hash and its index entry appear together or not."""
        return await self._run(self._layout.create(key, record))

    async def get(self, key: str) -> Mapping[str, Any] | None:
        """Return a fresh mapping of the record stored under ``key`` (the JSON text that
        was written, parsed), or None when no hash is there. One HGET.

        Raises CheckpointError INVALID_CHECKPOINT (or UNSUPPORTED_SCHEMA) when the hash
        has no record field or its record is not a valid record (see
        :func:`~tool_execution_checkpoint.stores.decode_stored`)."""
        return await self._run(self._layout.get(key))

    async def compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint, *, durable: bool = True
    ) -> bool:
        """Replace the record under ``key`` with ``record`` if its stored revision is
        still ``expected_revision``; return whether it did. One EVALSHA that compares,
        writes the record and moves the key between the status indexes; kept out of the
        append-only file when ``durable`` is False, unless the store was made with
        ``synchronous_delivered=True``."""
        swap = self._layout.swap(key, expected_revision, record, durable=durable)
        return await self._run(swap)

    async def post_compare_and_swap(
        self, key: str, expected_revision: int, record: Checkpoint
    ) -> bool | None:
        """:meth:`compare_and_swap` with ``durable=False``, sent without waiting for its
        reply: ``CLIENT REPLY SKIP``, then one EVAL of the script's text, in one buffer on
        one connection; None once sent. On a cluster it goes to its slot's master and is
        lost if redirected. Awaited instead (its answer returned) with
        ``synchronous_delivered=True``, or where the server does not honour ``CLIENT REPLY
        SKIP`` (tried once per store)."""
        if self._layout.relax and self._posting is not False:
            request = self._layout.posted_swap(key, expected_revision, record)
            if not self._layout.cluster:
                posted = await self._send(self._pool, self._where, request, posted=True)
            else:
                cluster = await self._ready()
                target = self._owner(cluster.nodes_manager, request)
                pool = node_pool(cluster, target)
                posted = await self._send(pool, target.name, request, posted=True)
            if posted:
                return None
        return await self.compare_and_swap(key, expected_revision, record, durable=False)

    async def clock_us(self) -> int:
        """The server's TIME, in microseconds since the epoch: the clock every write
        stamps its index score with. On a cluster, the earliest of the masters' TIME (one
        per shard, pipelined), so a listing never takes a record for older than its own
        master's clock makes it."""
        return await self._run(self._layout.clock())

    async def written_us(self, key: str) -> int | None:
        """When the record under ``key`` was last written, on its server's clock (its
        index score), or None when no hash is there or its status indexes it nowhere.
        One read-only script."""
        return await self._run(self._layout.written(key))

    async def list_records(self, listing: Listing) -> list[RecordSummary | BrokenRecord]:
        """The records ``listing`` selects (see
        :meth:`~tool_execution_checkpoint.stores.OperableCheckpointStore.list_records`;
        its time bound on the server's clock, as :meth:`clock_us`). Raises CheckpointError
        INVALID_ARGUMENT for a ``listing`` that is not a
        :class:`~tool_execution_checkpoint.stores.Listing`.

        One read-only script per shard reads the matching keys of the shard's
        per-status indexes, the store sorts their union and fetches the page's records
        in scripts of up to 256 keys, checking each against the query again. Cost grows
        with the records in the asked statuses before the bound, not with the page.
        Records that change during the call are shown as they are when fetched, or left
        out if they no longer match; a page is shorter than the limit only when no more
        records matched."""
        return await self._run(self._layout.list_records(listing))

    async def check_durability(self, *, on_weak: OnWeak = "raise") -> DurabilityReport:
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
        policy = check_on_weak(on_weak)
        if not self._layout.cluster:
            return apply_policy(await self._run(self._layout.durability()), policy)
        cluster = await self._ready()
        reports = [
            (node.name, await self._run(self._layout.durability(), node))
            for node in cluster.get_primaries()
        ]
        return apply_policy(merged(reports), policy)

    async def aclose(self) -> None:
        """Close the client if the store built it (from a URL); a client passed in is
        left to its owner."""
        if not self._owns_client or self._client is None:  # a cluster's, never built
            return
        if True:  # ASYNC
            if self._layout.cluster:  # the store read only the slot map: close its nodes
                await self._client.nodes_manager.aclose()
                await self._client.nodes_manager.aclose("startup_nodes")
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        where = f"cluster {self._where}" if self._layout.cluster else self._where
        return f"{type(self).__name__}({where}, prefix={self._layout.prefix!r})"

    async def _run(self, operation: Operation[_T], node: Node | None = None) -> _T:
        """Send what ``operation`` asks (to ``node``, else where its keys route) until it
        returns; a store error is thrown into it."""
        try:
            request = next(operation)
            while True:
                try:
                    if isinstance(request, Batch):
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

    async def _execute(self, request: Request, node: Node | None = None) -> object:
        """``request``'s reply: on one node, sent once; on a cluster, sent to ``node`` or
        the master of its slot, and again after each redirection (at most 5 sends)."""
        if not self._layout.cluster:
            return await self._send(self._pool, self._where, request)
        cluster = await self._ready()
        manager = cluster.nodes_manager
        asking = False
        target = node
        for _attempt in range(_REDIRECTS):
            if target is None:
                target = self._owner(manager, request)
            pool = node_pool(cluster, target)
            try:
                return await self._send(pool, target.name, request, asking=asking, redirects=True)
            except MovedError as moved:
                await manager.move_slot(moved)
                target, asking = node, False
            except AskError as ask:
                target = manager.get_node(host=ask.host, port=ask.port)
                asking = target is not None
            except TryAgainError:
                if True:  # ASYNC
                    await asyncio.sleep(0.05)
                else:
                    time.sleep(0.05)
                target, asking = node, False
            except (RedisUnavailableError, RedisOutcomeUnknownError):
                self._stale = True
                raise
            except RedisCommandError as refused:
                if refused.code == "CLUSTERDOWN":
                    self._stale = True
                raise
        raise redirected(self._where, _REDIRECTS)

    async def _execute_batch(self, batch: Batch) -> list[object]:
        """Each read of ``batch`` answered, in order. On a cluster the reads are
        pipelined on one connection per master (the asyncio store asks the masters at the
        same time); a read answered with an error (a redirect, NOSCRIPT...) did not run
        and is sent again alone."""
        if not self._layout.cluster or len(batch.requests) < 2:
            return [await self._execute(request) for request in batch.requests]
        cluster = await self._ready()
        groups: dict[str, tuple[Node, list[int]]] = {}
        for position, request in enumerate(batch.requests):
            owner = self._owner(cluster.nodes_manager, request)
            groups.setdefault(owner.name, (owner, []))[1].append(position)
        nodes = list(groups.values())
        sends = [
            (node_pool(cluster, owner), owner.name, [batch.requests[p] for p in positions])
            for owner, positions in nodes
        ]
        if True:  # ASYNC
            pipelines = await asyncio.gather(*(self._pipelined(*send) for send in sends))
        else:
            pipelines = [self._pipelined(*send) for send in sends]
        replies: list[object] = [None] * len(batch.requests)
        again: list[int] = []
        for (_owner, positions), answers in zip(nodes, pipelines, strict=True):
            for position, answer in zip(positions, answers, strict=True):
                if isinstance(answer, ResponseError):
                    again.append(position)
                else:
                    replies[position] = answer
        for position in again:
            replies[position] = await self._execute(batch.requests[position])
        return replies

    async def _pipelined(self, pool: Pool, where: str, requests: list[Request]) -> list[object]:
        """Send the reads, then read every answer (an error answer as its exception)."""
        kwargs = pool.connection_kwargs
        try:
            connection = await pool.get_connection()
        except Exception as error:
            self._stale = True
            timeout = kwargs.get("socket_connect_timeout") or kwargs.get("socket_timeout")
            failure = connect_failure(error, where, timeout)
            if failure is None:
                raise
            raise failure from error
        answers: list[object] = []
        try:
            await connection.send_packed_command(packed(*(request.args for request in requests)))
            for _request in requests:
                try:
                    answers.append(await connection.read_response(disable_decoding=True))
                except ResponseError as refused:
                    answers.append(refused)
        except Exception as error:
            self._stale = True
            timeout = kwargs.get("socket_timeout")
            failure = exchange_failure(error, requests[0].write, where, timeout)
            if failure is None:
                raise
            raise failure from error
        finally:
            await put_back(pool, connection)
        return answers

    async def _send(
        self,
        pool: Pool,
        where: str,
        request: Request,
        *,
        asking: bool = False,
        redirects: bool = False,
        posted: bool = False,
    ) -> object:
        """Send ``request`` once on one connection of ``pool``; a cluster's redirects
        (``redirects``) are raised as redis-py raised them, every other failure as a
        store error. ``posted``: sent unanswered (:func:`post`) where the server honours
        it; returns whether it was."""
        kwargs = pool.connection_kwargs
        try:
            connection = await pool.get_connection()
        except Exception as error:
            timeout = kwargs.get("socket_connect_timeout") or kwargs.get("socket_timeout")
            failure = connect_failure(error, where, timeout)
            if failure is None:
                raise
            raise failure from error
        try:
            if not posted:
                return await exchange(connection, request, asking=asking)
            if self._posting is None:
                self._posting = await replies_skippable(connection)
            if self._posting:
                await post(connection, request)
            return self._posting
        except Exception as error:
            if redirects and isinstance(error, _REDIRECTS_RAISED):
                raise
            timeout = kwargs.get("socket_timeout")
            failure = exchange_failure(error, request.write, where, timeout)
            if failure is None:
                raise
            raise failure from error
        finally:
            await put_back(pool, connection)

    def _owner(self, manager: Nodes, request: Request) -> Node:
        """The master that owns ``request``'s slot in the client's slot map; a slot with
        no master marks the map stale and is refused."""
        if request.route is None:  # pragma: no cover - server commands always name a node
            raise RedisReplyError("a cluster store sent a command with no key and no node")
        try:
            return manager.get_node_from_slot(key_slot(request.route))
        except RedisClusterException:
            self._stale = True
        raise not_covered(self._where)

    async def _ready(self) -> Cluster:
        """The cluster client with its slot map read, again when a failure made it
        stale. The asyncio store reads the map on first use too, and only the map, not
        the COMMAND table ``RedisCluster.initialize`` also reads."""
        cluster = self._built()
        if self._stale or not self._mapped:
            failure: StoreError | None = None
            try:
                await cluster.nodes_manager.initialize()
            except Exception as error:  # redis-py's message may quote the URL
                failure = self._start_failure(error)
            if failure is not None:
                raise failure
            self._mapped = True
            self._stale = False
        return cluster

    def _start_failure(self, error: Exception) -> StoreError:
        """The store error for ``error``, raised while reading the slot map; ``error``
        itself is raised again when it is not a Redis, cluster or OS error. The caller
        raises the store error after its ``except`` block, so that no chain holds
        ``error`` (whose message may quote the URL)."""
        failure = cluster_start_failure(error, self._where, self._connect_timeout_s)
        if failure is None:
            raise error
        return failure

    def _built(self) -> Cluster:
        """The cluster client; the synchronous store builds it (which reads the slot map)
        on first use."""
        if True:  # ASYNC
            return cast(Cluster, self._client)
        if self._client is None:
            with self._lock:
                if self._client is None:
                    failure: StoreError | None = None
                    try:
                        self._client = self._build()
                    except Exception as error:  # redis-py's message may quote the URL
                        failure = self._start_failure(error)
                    if failure is not None:
                        raise failure
        return cast(Cluster, self._client)
