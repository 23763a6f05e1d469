"""RedisStore and AsyncRedisStore on a real 3-master Redis Cluster (Debian's redis-server,
started on loopback for the session with appendonly yes, appendfsync always and a
password): the conformance suites with the garbage hook, listings across the shards held
to MemoryStore, records spread over every master, MOVED and ASK answered by resending to
the right master, outcomes classified, and a race of real processes with a kill storm."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import redis
import redis.cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

from redis_server import (  # noqa: F401
    RedisCluster,
    cluster_for,
    free_port,
    redis_cluster_url,
    redis_url,
    server_for,
)
from strategies import identifier_chars, timestamps
from test_redis_store import write_everywhere
from tool_execution_checkpoint import (
    Binding,
    CheckpointError,
    ErrorCode,
    Listing,
    MemoryStore,
    OutcomeUnknownError,
    Status,
    checkpoint_key,
    claim_execution,
    cli,
    create_checkpoint,
    open_store,
)
from tool_execution_checkpoint.runner import MARK_POSTED, RunStatus, run_once, run_once_async
from tool_execution_checkpoint.stores import RecordSummary
from tool_execution_checkpoint.stores.redis import (
    CLUSTER_SHARDS,
    AsyncRedisStore,
    RedisAuthenticationError,
    RedisCommandError,
    RedisConfigurationError,
    RedisOutcomeUnknownError,
    RedisStore,
    RedisUnavailableError,
    clients_async,
)
from tool_execution_checkpoint.stores.redis.layout import SHARD_TAGS, Request
from tool_execution_checkpoint.stores.redis.scripts import FETCH
from tool_execution_checkpoint.testing import OperableStoreConformance, active_profile
from tool_execution_checkpoint.testing.listings import (
    check_paging,
    check_whole_listing,
    selected,
    timed,
)
from tool_execution_checkpoint.testing.processes import kill_storm

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:00:05Z"


def fresh_prefix() -> str:
    return f"c-{uuid.uuid4().hex}:"


def binding(call_id: str = "call-1") -> Binding:
    return Binding("cluster-tests", call_id, "tool", "1", "sha256:0")


def cluster_client(url: str) -> redis.cluster.RedisCluster:
    """A redis-py cluster client beside the store (for raw writes and checks)."""
    cluster = cluster_for(url)
    first = cluster.servers[0]
    return redis.cluster.RedisCluster(host=first.host, port=first.port, password=cluster.password)


def node_of(cluster: RedisCluster, name: str) -> Any:
    """The test server whose host:port is ``name``."""
    return next(s for s in cluster.servers if f"{s.host}:{s.port}" == name)


def error_count(client: redis.Redis, code: str) -> int:
    stats: dict[str, Any] = client.info("errorstats")
    entry = stats.get(f"errorstat_{code}", {"count": 0})
    return int(entry["count"])


@pytest.fixture
def cluster(redis_cluster_url: str) -> RedisCluster:  # noqa: F811
    return cluster_for(redis_cluster_url)


class SlotMove:
    """One slot of the test cluster moving from the master that owns it in ``store``'s
    slot map (``source``) to another master (``target``), as a reshard moves it: begun
    IMPORTING and MIGRATING, keys moved by MIGRATE, then the slot given to the new master
    on every node. ``admins`` are clients of each node, by name."""

    def __init__(self, cluster: RedisCluster, store: RedisStore, slot: int) -> None:
        self.cluster, self.slot = cluster, slot
        self.admins: dict[str, Any] = {f"{s.host}:{s.port}": s.client() for s in cluster.servers}
        admins = self.admins
        source = cast(Any, store.client).nodes_manager.get_node_from_slot(slot).name
        self.source = source
        self.target = next(name for name in admins if name != source)
        self.ids: dict[str, str] = {}
        for name, admin in admins.items():
            reply = admin.execute_command("CLUSTER", "MYID")
            self.ids[name] = reply.decode() if isinstance(reply, bytes) else reply
        to, of = self.ids[self.target], self.ids[source]
        admins[self.target].execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", of)
        admins[source].execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", to)

    def migrate(self, *keys: bytes) -> None:
        """Move ``keys`` to the new master."""
        host, port = self.target.rsplit(":", 1)
        self.admins[self.source].execute_command(
            "MIGRATE", host, port, "", 0, 5000, "AUTH", self.cluster.password, "KEYS", *keys
        )

    def finish(self) -> None:
        """Move the slot's remaining keys, then give the slot to the new master."""
        source = self.admins[self.source]
        while keys := source.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, 100):
            self.migrate(*keys)
        for admin in self.admins.values():
            admin.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.ids[self.target])

    def __enter__(self) -> SlotMove:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for admin in self.admins.values():
            admin.close()


# --- the conformance suites ----------------------------------------------------------------


class TestRedisClusterStore(OperableStoreConformance):
    """Every store of a fresh prefix shares one RedisCluster client (not owned)."""

    store_clock = True

    harness_examples = max(1, active_profile().max_examples // 2)

    @pytest.fixture(autouse=True)
    def _client(self, redis_cluster_url: str) -> Iterator[None]:  # noqa: F811
        self.client = cluster_client(redis_cluster_url)
        yield
        self.client.close()

    def make_store(self) -> RedisStore:
        return RedisStore(self.client, prefix=fresh_prefix())

    def write_raw(self, store: RedisStore, key: str, raw: bytes) -> None:
        """The bytes as the hash's record field, indexed as delivered at the epoch, in
        the key's shard (its slot's master, routed by redis-py)."""
        name = store._layout.record_key(key)
        fields = {b"revision": b"1", b"status": b"delivered", b"updated_us": b"0", b"record": raw}
        self.client.hset(name, mapping=fields)  # type: ignore[arg-type]
        self.client.zadd(store._layout.index_key(key, Status.DELIVERED), {key: 0})


class TestAsyncRedisClusterStore(OperableStoreConformance):
    """The asyncio store on the cluster through the adapter; each store owns its client
    (built from the cluster URL) and the harness closes it. Its state machines run fewer
    examples than the sync suite's (the layout and listing code is the same; the
    asyncio driver is what this suite adds), to keep the run short."""

    store_clock = True

    harness_examples = max(1, active_profile().max_examples // 3)
    contract_examples = max(1, active_profile().max_examples // 6)

    @pytest.fixture(autouse=True)
    def _url(self, redis_cluster_url: str) -> None:  # noqa: F811
        self.url = redis_cluster_url

    def make_store(self) -> AsyncRedisStore:
        return AsyncRedisStore.from_url(self.url, prefix=fresh_prefix())

    def write_raw(self, store: AsyncRedisStore, key: str, raw: bytes) -> None:
        """As the sync suite's hook, with a sync cluster client."""
        client = cluster_client(self.url)
        try:
            TestRedisClusterStore.write_raw(
                cast(Any, SimpleNamespace(client=client)),
                cast(Any, store),
                key,
                raw,
            )
        finally:
            client.close()


# --- the layout: hash tags, shards, masters --------------------------------------------------


def test_each_shard_tag_hashes_into_its_sixteenth_of_the_slots() -> None:
    assert len(SHARD_TAGS) == CLUSTER_SHARDS == 16
    for shard, tag in enumerate(SHARD_TAGS):
        assert key_slot(tag.encode()) // 1024 == shard
    store = RedisStore.from_url("redis+cluster://127.0.0.1:1", prefix="p:")
    layout = store._layout
    keys = [checkpoint_key(binding(f"call-{n}")) for n in range(200)]
    assert {layout.shard_of(key) for key in keys} == set(range(CLUSTER_SHARDS))
    for key in keys:
        record, shard = layout.record_key(key), layout.shard_of(key)
        assert record == b"p:{" + SHARD_TAGS[shard].encode() + b"}rec:" + key.encode()
        # The record and every index of its shard share one slot: a script touches one.
        slots = {key_slot(layout.index_key(key, status)) for status in Status}
        assert slots == {key_slot(record)}


def test_writes_land_on_every_master(cluster: RedisCluster, redis_cluster_url: str) -> None:  # noqa: F811
    store = RedisStore.from_url(redis_cluster_url, prefix=fresh_prefix())
    keys = [checkpoint_key(binding(f"spread-{n}")) for n in range(48)]
    try:
        for key in keys:
            assert store.create_if_absent(key, create_checkpoint(binding(key), created_at=NOW))
        holders: dict[str, int] = {}
        for server in cluster.servers:
            client = server.client()
            try:
                found = list(client.scan_iter(match=f"{store.prefix}*rec:*", count=1000))
                holders[f"{server.host}:{server.port}"] = len(found)
                for name in found:  # each record sits on the master that owns its slot
                    owner = cast(Any, store.client).nodes_manager.get_node_from_slot(key_slot(name))
                    assert owner.name == f"{server.host}:{server.port}"
            finally:
                client.close()
        assert sum(holders.values()) == len(keys)
        assert all(count > 0 for count in holders.values()), holders
        assert len(store.list_records(Listing([Status.READY]))) == len(keys)
    finally:
        store.close()


listing_keys = st.lists(
    st.text(identifier_chars, min_size=1, max_size=6) | st.sampled_from(["a", "b", "ab", "é"]),
    min_size=1,
    max_size=12,
    unique=True,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), keys=listing_keys)
def test_listing_across_shards_answers_as_memory_store_does(
    redis_cluster_url: str,  # noqa: F811
    data: st.DataObject,
    keys: list[str],
) -> None:
    store = RedisStore.from_url(redis_cluster_url, prefix=fresh_prefix())
    model = MemoryStore()
    try:
        for key in keys:
            status = data.draw(st.sampled_from(list(Status)))
            write_everywhere([store, model], key, status, NOW, data.draw(timestamps()))
        # Each shard's records are scored by their own master's TIME; the whole listing is
        # the model's, and bounded listings are held to it by those times.
        reference = check_whole_listing(store, model)
        times = [line.written_us for line in reference if isinstance(line, RecordSummary)]
        for _ in range(3):
            statuses = data.draw(st.sets(st.sampled_from(list(Status))))
            before = data.draw(st.none() | st.integers(-(2**62), 2**62) | st.sampled_from(times))
            limit = data.draw(st.integers(1, 8))
            after = data.draw(st.none() | st.sampled_from(sorted(keys)))
            listing = Listing(statuses, written_before_us=before, after_key=after, limit=limit)
            assert timed(store.list_records(listing)) == timed(selected(reference, listing))
            # Paging through everything gives the whole answer, page by page.
            check_paging(store, reference, statuses, before, limit)
    finally:
        store.close()


# --- routing: MOVED and ASK mean the command did not run --------------------------------------


def test_a_stale_slot_map_is_corrected_by_moved_and_the_write_lands_once(
    cluster: RedisCluster,
    redis_cluster_url: str,  # noqa: F811
) -> None:
    store = RedisStore.from_url(redis_cluster_url, prefix=fresh_prefix())
    key = checkpoint_key(binding("moved"))
    try:
        store.get(key)
        manager = cast(Any, store.client).nodes_manager
        slot = key_slot(store._layout.record_key(key))
        owner = manager.get_node_from_slot(slot)
        wrong = next(node for node in manager.nodes_cache.values() if node.name != owner.name)
        manager.slots_cache[slot] = [wrong]  # what a resharding leaves in a client
        wrong_admin = node_of(cluster, wrong.name).client()
        moved_before = error_count(wrong_admin, "MOVED")
        created = create_checkpoint(binding("moved"), created_at=NOW)
        assert store.create_if_absent(key, created) is True
        assert error_count(wrong_admin, "MOVED") == moved_before + 1
        assert manager.get_node_from_slot(slot).name == owner.name
        claim = claim_execution(created, attempt_id="a-1", at=LATER)
        assert store.compare_and_swap(key, 1, claim.next) is True
        assert store.get(key) == claim.next.to_dict()
        wrong_admin.close()
    finally:
        store.close()


def test_a_slot_moving_between_masters_is_followed_and_refused_writes_change_nothing(
    cluster: RedisCluster,
    redis_cluster_url: str,  # noqa: F811
) -> None:
    """A real migration of one shard's slot. While it is MIGRATING, a read of an absent
    record is answered ASK by the old master and follows to the new one (after
    ASKING); a write's script, whose keys are split or missing, is answered TRYAGAIN
    (it did not run) until the store gives up with RedisUnavailableError, nothing
    applied. Once the slot has moved, the store is answered MOVED and follows."""
    store = RedisStore.from_url(redis_cluster_url, prefix=fresh_prefix())
    here = checkpoint_key(binding("here"))
    layout = store._layout
    slot = key_slot(layout.record_key(here))
    absent = next(
        key
        for key in (checkpoint_key(binding(f"absent-{n}")) for n in range(1000))
        if key_slot(layout.record_key(key)) == slot
    )
    created = create_checkpoint(binding("here"), created_at=NOW)
    assert store.create_if_absent(here, created)
    with store, SlotMove(cluster, store, slot) as move:
        admins, source, target = move.admins, move.source, move.target
        asked = error_count(admins[source], "ASK")
        assert store.get(here) == created.to_dict()  # still on the old master
        assert store.get(absent) is None  # asked to look on the new one
        assert error_count(admins[source], "ASK") > asked
        claim = claim_execution(created, attempt_id="a-1", at=LATER)

        def counts() -> dict[str, int]:
            return {
                name: admin.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)
                for name, admin in admins.items()
            }

        before = counts()
        writes: tuple[Callable[[], object], ...] = (
            lambda: store.create_if_absent(absent, create_checkpoint(binding(), created_at=NOW)),
            lambda: store.compare_and_swap(here, 1, claim.next),
        )
        for write in writes:
            with pytest.raises(RedisUnavailableError, match="nothing was applied") as refused:
                write()
            assert not isinstance(refused.value, OutcomeUnknownError)
        assert store.get(here) == created.to_dict()
        assert counts() == before  # no key appeared on either master

        move.finish()
        moved = error_count(admins[source], "MOVED")
        assert store.compare_and_swap(here, 1, claim.next) is True
        assert error_count(admins[source], "MOVED") == moved + 1
        assert store.get(here) == claim.next.to_dict()
        assert admins[target].exists(layout.record_key(here)) == 1


def test_a_script_missing_on_the_node_an_ask_points_to_is_loaded_and_sent_after_asking(
    cluster: RedisCluster,
    redis_cluster_url: str,  # noqa: F811
) -> None:
    """A slot MIGRATING with a record's hash already on the new master: a read-only
    script on that hash (the fetch a listing sends) is answered ASK by the old master,
    then NOSCRIPT by the new one, whose script cache is empty. The store loads the
    script and sends it again after ASKING again (the server forgets ASKING after one
    command), so the new master answers it rather than MOVED."""
    store = RedisStore.from_url(redis_cluster_url, prefix=fresh_prefix())
    key = checkpoint_key(binding("asked"))
    record_key = store._layout.record_key(key)
    fetch = Request(
        (b"EVALSHA", FETCH.sha, b"1", record_key), write=False, script=FETCH, route=record_key
    )
    assert store.create_if_absent(key, create_checkpoint(binding("asked"), created_at=NOW))
    with store, SlotMove(cluster, store, key_slot(record_key)) as move:
        new_master = move.admins[move.target]
        move.migrate(record_key)
        new_master.script_flush()
        noscript = error_count(new_master, "NOSCRIPT")
        moved = error_count(new_master, "MOVED")
        try:
            [text] = cast(list[bytes], store._execute(fetch))
        finally:  # the slot moves on, whatever the fetch did
            move.finish()
        assert json.loads(text) == store.get(key)
        assert error_count(new_master, "NOSCRIPT") == noscript + 1
        assert error_count(new_master, "MOVED") == moved


class _HeldConnection:
    """A cluster node's connection whose connect never ends and whose disconnect waits
    for ``gate``."""

    def __init__(self) -> None:
        self.connecting, self.disconnecting, self.gate = (asyncio.Event() for _ in range(3))

    async def connect(self) -> None:
        self.connecting.set()
        await asyncio.Event().wait()

    async def disconnect(self) -> None:
        self.disconnecting.set()
        await self.gate.wait()


class _Node:
    """A cluster node as the store's node pool uses it, counting the connections out."""

    name = "127.0.0.1:1"

    def __init__(self, connection: object) -> None:
        self.connection_kwargs: dict[str, Any] = {}
        self.connection = connection
        self.out = 0

    def acquire_connection(self) -> object:
        self.out += 1
        return self.connection

    def release(self, connection: object) -> None:
        assert connection is self.connection
        self.out -= 1

    async def disconnect_if_needed(self, connection: object) -> None:
        assert connection is self.connection
        raise ConnectionError("the node went away")


def test_a_node_connection_cancelled_while_connecting_goes_back_even_if_cancelled_again() -> None:
    connection = _HeldConnection()
    node = _Node(connection)

    async def scenario() -> None:
        pool = clients_async.node_pool(cast(Any, None), cast(Any, node))
        task = asyncio.ensure_future(pool.get_connection())
        await connection.connecting.wait()
        task.cancel()
        await connection.disconnecting.wait()
        task.cancel()  # a second cancellation, while the first unwinds
        connection.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):
            if not node.out:
                break
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert node.out == 0


def test_a_node_connection_goes_back_even_when_checking_it_fails() -> None:
    node = _Node(object())

    async def scenario() -> None:
        pool = clients_async.node_pool(cast(Any, None), cast(Any, node))
        connection = cast(Any, node).acquire_connection()
        with pytest.raises(ConnectionError):
            await pool.release(connection)

    asyncio.run(scenario())
    assert node.out == 0


# --- outcomes, configuration and secrets -----------------------------------------------------


def test_a_write_whose_answer_is_late_is_outcome_unknown_and_read_back_decides(
    cluster: RedisCluster,
    redis_cluster_url: str,  # noqa: F811
) -> None:
    """The owning master is paused (CLIENT PAUSE) past the store's socket timeout: the
    write was sent, so the store says the outcome is unknown (it never retries); what
    reading back shows decides the next step. (Redis drops a paused command whose client
    went away, so here it did not land.)"""
    store = RedisStore.from_url(redis_cluster_url, prefix=fresh_prefix(), socket_timeout=0.5)
    key = checkpoint_key(binding("late"))
    created = create_checkpoint(binding("late"), created_at=NOW)
    try:
        assert store.create_if_absent(key, created)
        owner = cast(Any, store.client).nodes_manager.get_node_from_slot(
            key_slot(store._layout.record_key(key))
        )
        admin = node_of(cluster, owner.name).client()
        claim = claim_execution(created, attempt_id="a-1", at=LATER)
        admin.client_pause(1500, all=True)
        started = time.monotonic()
        with pytest.raises(RedisOutcomeUnknownError) as caught:
            store.compare_and_swap(key, 1, claim.next)
        assert time.monotonic() - started < 1.5
        assert owner.name in str(caught.value)
        time.sleep(1.6)
        stored = store.get(key)  # either the old record or exactly the claim
        assert stored in (created.to_dict(), claim.next.to_dict())
        landed = stored == claim.next.to_dict()
        # Decided by what was read back: claim again only if the claim did not land.
        assert store.compare_and_swap(key, 1, claim.next) is (not landed)
        assert store.get(key) == claim.next.to_dict()
        admin.close()
    finally:
        store.close()


def test_a_single_node_store_on_a_cluster_node_is_refused_before_anything_runs(
    cluster: RedisCluster,
) -> None:
    first = cluster.servers[0]
    store = RedisStore.from_url(first.url(), prefix=fresh_prefix())
    try:
        for number in range(8):  # some land on the first node's slots: CROSSSLOT there
            key = checkpoint_key(binding(f"single-{number}"))
            with pytest.raises(RedisCommandError) as caught:
                store.create_if_absent(key, create_checkpoint(binding(), created_at=NOW))
            assert caught.value.code in ("CROSSSLOT", "MOVED")
            assert "redis+cluster://" in str(caught.value)
            assert not isinstance(caught.value, OutcomeUnknownError)
    finally:
        store.close()


def test_cluster_urls_that_cannot_work_are_clear_errors_without_secrets(
    cluster: RedisCluster,
    redis_url: str,  # noqa: F811
) -> None:
    first = cluster.servers[0]
    wrong = RedisStore.from_url(f"redis+cluster://:hunter2@127.0.0.1:{first.port}")
    with pytest.raises(RedisAuthenticationError) as refused:
        wrong.get("k")
    assert_no_secret(refused.value, "hunter2")

    single = server_for(redis_url)
    plain = RedisStore.from_url(f"redis+cluster://:{single.password}@127.0.0.1:{single.port}")
    with pytest.raises(RedisConfigurationError, match="not a Redis Cluster node") as disabled:
        plain.get("k")
    assert_no_secret(disabled.value, single.password)

    port = free_port()
    for build in (RedisStore.from_url, RedisStore):
        absent = build(f"redis+cluster://:hunter2@127.0.0.1:{port}")
        with pytest.raises(RedisUnavailableError) as unreachable:
            absent.create_if_absent("k", create_checkpoint(binding(), created_at=NOW))
        assert f"127.0.0.1:{port}" in str(unreachable.value)
        assert_no_secret(unreachable.value, "hunter2")
        assert repr(absent) == f"RedisStore(cluster 127.0.0.1:{port}, prefix='tec:')"

    with pytest.raises(RedisConfigurationError, match="only database 0") as database:
        RedisStore.from_url("redis+cluster://:hunter2@127.0.0.1:7000/3")
    assert_no_secret(database.value, "hunter2")
    with pytest.raises(RedisConfigurationError) as bad:
        AsyncRedisStore.from_url("redis+cluster://:hunter2@127.0.0.1:notaport")
    assert_no_secret(bad.value, "hunter2")
    for prefix in ("a{b", "a}", "{x}"):
        with pytest.raises(CheckpointError) as braces:
            RedisStore.from_url(f"redis+cluster://127.0.0.1:{first.port}", prefix=prefix)
        assert braces.value.code is ErrorCode.INVALID_ARGUMENT
        assert braces.value.field == "prefix"
    assert isinstance(open_store(cluster.url()), RedisStore)


def assert_no_secret(error: BaseException, secret: str) -> None:
    """No message, repr or argument anywhere in the chain (causes and contexts) shows
    ``secret``."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        assert secret not in str(current)
        assert secret not in repr(current)
        assert all(secret not in repr(argument) for argument in current.args)
        current = current.__cause__ or current.__context__


def test_every_master_passes_the_durability_check(redis_cluster_url: str) -> None:  # noqa: F811
    with RedisStore.from_url(redis_cluster_url) as store:
        report = store.check_durability()
    assert report.durable
    assert (report.appendonly, report.appendfsync) == ("yes", "always")

    async def twin() -> bool:
        async with AsyncRedisStore.from_url(redis_cluster_url) as store:
            return (await store.check_durability()).durable

    assert asyncio.run(twin())


def test_a_weak_master_is_named_in_the_durability_report(
    cluster: RedisCluster,
    redis_cluster_url: str,  # noqa: F811
) -> None:
    weak = cluster.servers[1]
    admin = weak.client()
    admin.config_set("appendfsync", "everysec")
    try:
        with RedisStore.from_url(redis_cluster_url) as store:
            report = store.check_durability(on_weak="ignore")
        assert report.appendfsync is None  # the masters disagree
        assert len(report.problems) == 1
        assert report.problems[0].startswith(f"{weak.host}:{weak.port}: appendfsync is everysec")
    finally:
        admin.config_set("appendfsync", "always")
        admin.close()


# --- real processes: a race and a kill storm --------------------------------------------------


def test_the_cluster_store_survives_a_race_of_processes_and_a_kill_storm(
    cluster: RedisCluster, tmp_path: Path
) -> None:
    """Worker processes share the cluster through open_store(url) (default prefix, so
    the cluster is emptied first): every round's claims race from one revision, and
    workers are killed with SIGKILL mid-protocol; the recovery pass checks every key."""
    for client in cluster.clients():
        client.flushall()
        client.close()
    report = kill_storm(
        "tool_execution_checkpoint.testing.processes:url_store",
        json.dumps({"url": cluster.url()}),
        directory=tmp_path / "storm",
        workers=4,
        keys=200,
        seconds=5.0,
        seed=7,
    )
    report.check()
    ran = sum(map(len, report.executions.values()))
    print(f"cluster storm: {report.rounds} rounds, {report.kills} kills, {ran} tool runs")
    assert report.rounds >= 1
    assert report.kills >= 5
    assert ran >= 20, "the workers hardly got to run: the storm proved little"
    store = cast(RedisStore, open_store(cluster.url()))
    try:
        shards = {store._layout.shard_of(checkpoint_key(binding_of(c))) for c in report.statuses}
        assert len(shards) > 1, "the storm's records all sat in one shard"
    finally:
        store.close()


def binding_of(call_id: str) -> Binding:
    return Binding("storm", call_id, "tool", "1", "sha256:0")


def test_open_store_and_the_command_line_take_a_cluster_url(
    cluster: RedisCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = fresh_prefix()
    url = cluster.url()
    store = cast(RedisStore, open_store(url, prefix=prefix))
    try:
        outcome = run_once(store, binding_of("cli-1"), lambda: {"ok": True}, lambda _payload: None)
        assert outcome.status is RunStatus.EXECUTED_AND_DELIVERED
    finally:
        store.close()
    capsys.readouterr()
    assert (
        cli.main(["list", url, "--prefix", prefix, "--status", "delivered", "--format", "json"])
        == 0
    )
    listed = capsys.readouterr().out
    assert checkpoint_key(binding_of("cli-1")) in listed
    assert cluster.password not in listed
    assert cli.main(["check-store", url, "--examples", "2"]) == 0
    checked = capsys.readouterr()
    assert "the store passed every check" in checked.out
    assert "ok    kill_storm" in checked.out  # the workers opened the cluster URL
    assert re.search(r"deleted \d+ keys matching tec-check-[0-9a-f]{8}-\*", checked.out)
    assert cluster.password not in checked.out + checked.err
    scratch = [
        key
        for server in cluster.servers
        for key in redis.Redis.from_url(server.url()).scan_iter(match="tec-check-*")
    ]
    assert scratch == [], "check-store left scratch keys on a master"


def test_the_delivered_mark_is_posted_to_its_slots_master(cluster: RedisCluster) -> None:
    """run_once's delivered mark goes unanswered (CLIENT REPLY SKIP) to the master of its
    record's slot, from the sync and the asyncio store, and lands there."""
    prefix = fresh_prefix()
    with RedisStore(cluster.url(), prefix=prefix) as store:
        for n in range(4):  # keys over several shards, so several masters
            outcome = run_once(store, binding(f"p{n}"), _returns(n), lambda _payload: None)
            assert outcome.reason == MARK_POSTED
            stored = store.get(checkpoint_key(binding(f"p{n}")))
            assert stored is not None
            assert stored["status"] == "delivered"

    async def main() -> None:
        async with AsyncRedisStore(cluster.url(), prefix=prefix) as store:
            for n in range(4, 8):
                outcome = await run_once_async(store, binding(f"p{n}"), _returns(n), _no_send)
                assert outcome.reason == MARK_POSTED
                stored = await store.get(checkpoint_key(binding(f"p{n}")))
                assert stored is not None
                assert stored["status"] == "delivered"

    asyncio.run(main())


async def _no_send(payload: object) -> None:
    del payload


def _returns(value: int) -> Callable[[], int]:
    return lambda: value
