"""A throwaway redis-server on loopback for the tests and the Redis benchmark.

:func:`start_redis_server` starts ``redis-server`` on 127.0.0.1 on a free port in a
directory of its own, with the settings the store's guarantees need (``appendonly yes``,
``appendfsync always``, no RDB snapshots) and a random ``requirepass``, and waits until it
answers PING. :func:`stop_redis_server` shuts it down. The session-scoped pytest fixture
:func:`redis_url` wraps both; a test module uses it with::

    from redis_server import redis_url  # noqa: F401

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

import pytest
import redis

__all__ = [
    "RedisServer",
    "RedisServerError",
    "find_redis_server",
    "free_port",
    "redis_url",
    "server_for",
    "start_redis_server",
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
) -> RedisServer:
    """Start redis-server in ``directory`` (created if needed) on a free loopback port and
    return once it answers PING. Raises RedisServerError with the log's tail if it does
    not come up."""
    binary = find_redis_server()
    directory.mkdir(parents=True, exist_ok=True)
    password = secrets.token_hex(16)
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
