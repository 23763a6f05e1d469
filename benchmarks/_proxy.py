"""A TCP proxy on loopback that counts round trips, whatever the client and its driver.

A round trip is a turn of the conversation: the client sends (one message or a pipeline
of them) and then waits for the server's answer. On each connection the proxy counts
the times the client starts sending after the server last spoke (or at the start), so
a pipeline counts once, a reply split over several TCP segments counts once, and a
client that waits for an answer before its next request counts once per request. The
count covers every connection through the proxy (a pool's too); only a quiet moment
with one caller at a time gives a count per call. It forwards bytes unchanged and adds
latency, so it is used to count, never to time.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from types import TracebackType

__all__ = ["CountingProxy"]


class CountingProxy:
    """``with CountingProxy(host, port) as proxy:`` connect to ``proxy.port`` on
    127.0.0.1; ``proxy.round_trips`` counts turns since the last :meth:`reset`."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._round_trips = 0
        self._closing = False
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    @property
    def round_trips(self) -> int:
        with self._lock:
            return self._round_trips

    def reset(self) -> None:
        with self._lock:
            self._round_trips = 0

    def _count(self) -> None:
        with self._lock:
            self._round_trips += 1

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for end in (client, server):
                end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, server]
            thread = threading.Thread(target=self._pump, args=(client, server), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        """Forward both ways until either end closes, counting the client's turns."""
        selector = selectors.DefaultSelector()
        selector.register(client, selectors.EVENT_READ, server)
        selector.register(server, selectors.EVENT_READ, client)
        server_spoke_last = True
        try:
            while True:
                for key, _ in selector.select():
                    source = key.fileobj
                    assert isinstance(source, socket.socket)
                    data = source.recv(1 << 16)
                    if not data:
                        return
                    if source is client and server_spoke_last:
                        self._count()
                    server_spoke_last = source is server
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            selector.close()
            for end in (client, server):
                with contextlib.suppress(OSError):
                    end.close()

    def __enter__(self) -> CountingProxy:
        thread = threading.Thread(target=self._accept, daemon=True)
        self._threads.append(thread)
        thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._closing = True
        self.listener.close()
        with self._lock:
            ends = list(self._sockets)
        for end in ends:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
