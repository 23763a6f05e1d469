"""A throwaway redis-server on loopback for the tests and the Redis benchmark.

:func:`start_redis_server` starts ``redis-server`` on 127.0.0.1 on a free port in a
directory of its own, with the settings the store's guarantees need (``appendonly yes``,
``appendfsync always``, no RDB snapshots) and a random ``requirepass``, and waits until it
answers PING. :func:`stop_redis_server` shuts it down. The session-scoped pytest fixture
:func:`redis_url` wraps both; a test module uses it with::

    from redis_server import redis_url  # noqa: F401

:func:`start_redis_cluster` starts three such servers with ``cluster-enabled yes`` (one
password for all, ``masterauth`` set), joins them into a 3-master cluster with
``redis-cli --cluster create ... --cluster-replicas 0`` and waits until every node reports
``cluster_state:ok``; :func:`stop_redis_cluster` stops them. The session-scoped fixture
:func:`redis_cluster_url` yields ``redis+cluster://:PASSWORD@127.0.0.1:PORT`` (the first
node: the store discovers the others).

A missing binary fails the fixture (never a skip): run scripts/install-services.sh.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import redis

__all__ = [
    "RedisCluster",
    "RedisServer",
    "RedisServerError",
    "cluster_for",
    "find_redis_server",
    "free_port",
    "redis_cluster_url",
    "redis_url",
    "server_for",
    "start_redis_cluster",
    "start_redis_server",
    "stop_redis_cluster",
    "stop_redis_server",
]

INSTALL_HINT = "run scripts/install-services.sh (as root) to install Debian's redis-server"


class RedisServerError(RuntimeError):
    """The test server could not be found or started."""


@dataclass
class RedisServer:
    """A running test server."""

    process: subprocess.Popen[bytes]
    host: str
    port: int
    password: str
    directory: Path

    def url(self, database: int = 0) -> str:
        """The URL with the password, e.g. ``redis://:PASSWORD@127.0.0.1:PORT/0``."""
        return f"redis://:{self.password}@{self.host}:{self.port}/{database}"

    def client(self, *, socket_timeout: float = 5.0) -> redis.Redis:
        """A new redis-py client on the server (for checks beside the store)."""
        return redis.Redis(
            host=self.host,
            port=self.port,
            password=self.password,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
        )


def find_redis_server(
    search_path: str | None = None, fallback: Path = Path("/usr/bin/redis-server")
) -> str:
    """The redis-server binary's path (on ``search_path``, PATH by default, else
    ``fallback``); raises RedisServerError naming the fix."""
    found = shutil.which("redis-server", path=search_path) or (
        str(fallback) if fallback.exists() else None
    )
    if found is None:
        raise RedisServerError(f"redis-server is not installed: {INSTALL_HINT}")
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_redis_server(
    directory: Path,
    *,
    appendfsync: str = "always",
    extra_arguments: Sequence[str] = (),
    timeout: float = 10.0,
    password: str | None = None,
    cluster: bool = False,
) -> RedisServer:
    """Start redis-server in ``directory`` (created if needed) on a free loopback port and
    return once it answers PING. Raises RedisServerError with the log's tail if it does
    not come up. With ``cluster``, the server runs with ``cluster-enabled yes`` (its
    nodes file and cluster bus port, another free port, are its own) and ``masterauth``
    set to the password, and is not yet part of a cluster."""
    binary = find_redis_server()
    directory.mkdir(parents=True, exist_ok=True)
    password = secrets.token_hex(16) if password is None else password
    last_error = "no attempt"
    for _attempt in range(3):  # a free port can be taken between the probe and the bind
        port = free_port()
        log = directory / f"redis-{port}.log"
        arguments = [
            binary,
            "--bind", "127.0.0.1",
            "--port", str(port),
            "--dir", str(directory),
            "--daemonize", "no",
            "--appendonly", "yes",
            "--appendfsync", appendfsync,
            "--save", "",
            "--requirepass", password,
            "--protected-mode", "yes",
            "--logfile", str(log),
            "--databases", "16",
            *(_cluster_arguments(directory, port, password) if cluster else ()),
            *extra_arguments,
        ]  # fmt: skip
        process = subprocess.Popen(
            arguments, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        server = RedisServer(process, "127.0.0.1", port, password, directory)
        if _wait_until_ready(server, timeout):
            return server
        stop_redis_server(server)
        tail = log.read_text(errors="replace")[-2_000:] if log.exists() else ""
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
        last_error = (tail + stderr).replace(password, "<password>")
    raise RedisServerError(f"redis-server did not start:\n{last_error}")


def _cluster_arguments(directory: Path, port: int, password: str) -> list[str]:
    return [
        "--cluster-enabled", "yes",
        "--cluster-config-file", str(directory / f"nodes-{port}.conf"),
        "--cluster-port", str(free_port()),
        "--cluster-node-timeout", "5000",
        "--masterauth", password,
    ]  # fmt: skip


def _wait_until_ready(server: RedisServer, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        client = server.client(socket_timeout=1.0)
        try:
            if client.ping():
                return True
        except redis.RedisError:
            time.sleep(0.02)
        finally:
            client.close()
    return False


def stop_redis_server(server: RedisServer, *, timeout: float = 10.0) -> None:
    """Stop the server (SIGTERM: it flushes its append-only file, repeated while it
    refuses), then SIGKILL after ``timeout`` seconds. Safe to call twice."""
    process = server.process
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        # Redis ignores a SIGTERM while it writes an initial AOF; ask again until it goes.
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.2)
    if process.poll() is None:
        process.kill()
        process.wait()
    if process.stderr is not None:
        process.stderr.close()


_RUNNING: dict[str, RedisServer] = {}


def server_for(url: str) -> RedisServer:
    """The running server behind a URL that :func:`redis_url` yielded."""
    return _RUNNING[url]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``redis://:PASSWORD@127.0.0.1:PORT/0`` of a redis-server started for the session;
    fails (never skips) when redis-server is missing or does not start."""
    try:
        server = start_redis_server(tmp_path_factory.mktemp("redis"))
    except RedisServerError as error:
        pytest.fail(str(error), pytrace=False)
    url = server.url()
    _RUNNING[url] = server
    try:
        yield url
    finally:
        del _RUNNING[url]
        stop_redis_server(server)


@dataclass
class RedisCluster:
    """A running test cluster: three masters, no replicas, one password."""

    servers: list[RedisServer]
    password: str

    def url(self) -> str:
        """``redis+cluster://:PASSWORD@127.0.0.1:PORT`` of the first node."""
        first = self.servers[0]
        return f"redis+cluster://:{self.password}@{first.host}:{first.port}"

    def clients(self) -> list[redis.Redis]:
        """One plain client per node (close them)."""
        return [server.client() for server in self.servers]


def start_redis_cluster(
    directory: Path, *, masters: int = 3, timeout: float = 30.0
) -> RedisCluster:
    """Start ``masters`` cluster-enabled servers in ``directory``, join them into one
    cluster that covers all 16384 slots (``redis-cli --cluster create``, no replicas) and
    return once every node says ``cluster_state:ok``. Raises RedisServerError naming what
    failed (the password is never shown)."""
    cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
    if not Path(cli).exists():
        raise RedisServerError(f"redis-cli is not installed: {INSTALL_HINT}")
    password = secrets.token_hex(16)
    servers: list[RedisServer] = []
    try:
        for number in range(masters):
            servers.append(
                start_redis_server(
                    directory / f"node-{number}", password=password, cluster=True, timeout=timeout
                )
            )
        nodes = [f"{server.host}:{server.port}" for server in servers]
        created = subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            env={"REDISCLI_AUTH": password, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if created.returncode != 0:
            output = (created.stdout + created.stderr).decode(errors="replace")
            raise RedisServerError(
                "redis-cli --cluster create failed:\n" + output.replace(password, "<password>")
            )
        cluster = RedisCluster(servers, password)
        _wait_until_cluster_ok(cluster, timeout)
        return cluster
    except BaseException:
        for server in servers:
            stop_redis_server(server)
        raise


def _wait_until_cluster_ok(cluster: RedisCluster, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    states: list[str] = []
    while time.monotonic() < deadline:
        states = []
        for server in cluster.servers:
            client = server.client(socket_timeout=1.0)
            try:
                info: Any = cast(Any, client).execute_command("CLUSTER", "INFO")
                if isinstance(info, bytes):
                    info = dict(line.split(":", 1) for line in info.decode().split() if ":" in line)
                state = info.get("cluster_state") if isinstance(info, dict) else None
                states.append(state if isinstance(state, str) else "unknown")
            except redis.RedisError as error:
                states.append(type(error).__name__)
            finally:
                client.close()
        if states == ["ok"] * len(cluster.servers):
            return
        time.sleep(0.1)
    raise RedisServerError(f"the test cluster did not reach cluster_state:ok: {states}")


def stop_redis_cluster(cluster: RedisCluster) -> None:
    """Stop every node (see :func:`stop_redis_server`). Safe to call twice."""
    for server in cluster.servers:
        stop_redis_server(server)


_CLUSTERS: dict[str, RedisCluster] = {}


def cluster_for(url: str) -> RedisCluster:
    """The running cluster behind a URL that :func:`redis_cluster_url` yielded."""
    return _CLUSTERS[url]


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``redis+cluster://:PASSWORD@127.0.0.1:PORT`` of a 3-master cluster started for
    the session; fails (never skips) when redis-server or redis-cli is missing or the
    cluster does not form."""
    try:
        cluster = start_redis_cluster(tmp_path_factory.mktemp("redis-cluster"))
    except RedisServerError as error:
        pytest.fail(str(error), pytrace=False)
    url = cluster.url()
    _CLUSTERS[url] = cluster
    try:
        yield url
    finally:
        del _CLUSTERS[url]
        stop_redis_cluster(cluster)
