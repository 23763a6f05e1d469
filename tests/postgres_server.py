"""A throwaway PostgreSQL server on loopback for the tests and the benchmark.

:class:`PostgresServer` runs ``initdb`` and ``pg_ctl`` from Debian's packages (as the
``postgres`` user when run as root, since both refuse root) in a temporary directory,
listening only on 127.0.0.1 on a free port, with its unix socket in that directory and
password (SCRAM) authentication on TCP. It creates a database owned by an unprivileged,
password-authenticated role, so wrong-credential and missing-privilege tests mean
something. The server is durable (``fsync`` on, ``synchronous_commit`` on) unless told
otherwise, and its databases collate linguistically (ICU ``en``: ``a < B < Z``), so a
store that forgets to compare keys by code point is caught.

pytest use::

    from postgres_server import postgres_server, postgres_url  # noqa: F401

A script (the benchmark) uses the class directly::

    with PostgresServer() as server:
        url = server.url

When the binaries are missing, :func:`postgres_server` fails the test (it never skips)
with a message saying to run ``scripts/install-services.sh``.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import psycopg
import pytest
from psycopg import sql

__all__ = [
    "INSTALL_HINT",
    "PostgresServer",
    "ServerUnavailableError",
    "find_bindir",
    "postgres_server",
    "postgres_url",
    "start_or_fail",
]

INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) were not found under "
    "/usr/lib/postgresql/*/bin or on PATH: run scripts/install-services.sh (as root) to "
    "install them, then rerun the tests"
)
ROOT = Path(__file__).resolve().parents[1]
DATABASE = "tec"
APP_ROLE = "tec_app"
ADMIN_ROLE = "tec_admin"


class ServerUnavailableError(RuntimeError):
    """The test server could not be found or started."""


def find_bindir() -> Path:
    """The directory holding initdb and pg_ctl: the newest Debian install, else PATH."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).parent
    raise ServerUnavailableError(INSTALL_HINT)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PostgresServer:
    """A PostgreSQL server in a temporary directory; ``start()``/``stop()`` or ``with``.

    Attributes (after ``start``): ``port``, ``url`` (the app role: owner of the database,
    no superuser), ``admin_url`` (a superuser, for fault injection and extra roles).
    """

    def __init__(self, *, durable: bool = True, max_connections: int = 200) -> None:
        self.durable = durable
        self.max_connections = max_connections
        self.port = 0
        self.directory: Path | None = None
        self.app_password = secrets.token_hex(16)
        self.admin_password = secrets.token_hex(16)
        self._as_postgres: list[str] = []

    # --- life cycle ---------------------------------------------------------------------

    def _run(self, *command: str) -> None:
        run = subprocess.run(
            [*self._as_postgres, *command],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if run.returncode != 0:
            raise ServerUnavailableError(
                f"{Path(command[0]).name} failed ({run.returncode}): {run.stderr.strip()} "
                f"(if PostgreSQL or its postgres user is missing, run "
                f"scripts/install-services.sh)"
            )

    def start(self) -> PostgresServer:
        """initdb, start on a free loopback port, create the app role and database."""
        bindir = find_bindir()
        self.directory = Path(tempfile.mkdtemp(prefix="tec-postgres-"))
        atexit.register(self.stop)  # in case the caller never gets to stop it
        data = self.directory / "data"
        pwfile = self.directory / "admin-password"
        pwfile.write_text(self.admin_password + "\n", encoding="utf-8")
        if os.geteuid() == 0:
            self._as_postgres = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.directory, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
        os.chmod(self.directory, 0o700)
        self._run(
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            ADMIN_ROLE,
            f"--pwfile={pwfile}",
            "--auth-local=scram-sha-256",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--locale-provider=icu",
            "--icu-locale=en",
            "--no-sync",
        )
        options = [
            "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={self.directory}",
            f"-c max_connections={self.max_connections}",
            f"-c fsync={'on' if self.durable else 'off'}",
            f"-c synchronous_commit={'on' if self.durable else 'off'}",
            "-c full_page_writes=on",
        ]
        for _attempt in range(5):
            self.port = free_port()
            try:
                self._run(
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(self.directory / "server.log"),
                    "-o",
                    " ".join([*options, f"-c port={self.port}"]),
                    "-w",
                    "-t",
                    "60",
                    "start",
                )
                break
            except ServerUnavailableError:  # the port was taken meanwhile: try another
                time.sleep(0.2)
        else:
            self.stop()
            raise ServerUnavailableError("PostgreSQL did not start; see its server.log")
        bootstrap = self._url(ADMIN_ROLE, self.admin_password, "postgres")
        with psycopg.connect(bootstrap, autocommit=True) as admin:
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(APP_ROLE), sql.Literal(self.app_password)
                )
            )
            admin.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(DATABASE), sql.Identifier(APP_ROLE)
                )
            )
        return self

    def stop(self) -> None:
        """Stop the server (immediate shutdown: it is thrown away) and remove its directory."""
        if self.directory is None:
            return
        data = self.directory / "data"
        if (data / "postmaster.pid").exists():
            with contextlib.suppress(ServerUnavailableError):
                self._run(str(find_bindir() / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # --- addresses and roles ------------------------------------------------------------

    def _url(self, role: str, password: str, database: str) -> str:
        return f"postgresql://{role}:{password}@127.0.0.1:{self.port}/{database}"

    @property
    def url(self) -> str:
        """The app role's URL: owner of the test database, not a superuser."""
        return self._url(APP_ROLE, self.app_password, DATABASE)

    @property
    def admin_url(self) -> str:
        """A superuser's URL on the test database."""
        return self._url(ADMIN_ROLE, self.admin_password, DATABASE)

    def url_with_password(self, password: str) -> str:
        """The app role's URL with another password (for wrong-credential tests)."""
        return self._url(APP_ROLE, password, DATABASE)

    def create_role(self, name: str, *, grants: str | None = None) -> str:
        """Create a login role with a password and only CONNECT and USAGE on the public
        schema (no table privileges, no CREATE); return its URL. ``grants`` is extra SQL
        run as superuser after creation (for example a GRANT)."""
        password = secrets.token_hex(16)
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(name), sql.Literal(password)
                )
            )
            admin.execute(
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                    sql.Identifier(DATABASE), sql.Identifier(name)
                )
            )
            admin.execute(
                sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(name))
            )
            if grants:
                admin.execute(grants.encode())
        return self._url(name, password, DATABASE)


# --- pytest fixtures ------------------------------------------------------------------


def start_or_fail() -> PostgresServer:
    """Start a server, or fail the calling test (never skip) saying what to do."""
    server = PostgresServer()
    try:
        return server.start()
    except ServerUnavailableError as error:
        server.stop()
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A running server for the whole session; fails (never skips) if it cannot start."""
    server = start_or_fail()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """``postgresql://tec_app:PASSWORD@127.0.0.1:PORT/tec``: a password-authenticated role
    that owns the database (it may create tables in the public schema)."""
    return postgres_server.url
