"""The failure this library exists for, with the real ``anthropic`` SDK's sessions tool runner.

A self-hosted host answers a managed-agents session's custom tool call with
``AsyncAnthropic().beta.sessions.events.tool_runner(session_id, tools=[...])`` (anthropic
2.16.0: the runner exists on the async client only). The runner opens the session's event
stream (``GET /v1/sessions/{id}/events/stream``, server-sent events), reads the session
(``GET /v1/sessions/{id}``) and its event history (``GET /v1/sessions/{id}/events``), and
runs the tool for every ``agent.custom_tool_use`` event that a ``session.status_idle``
with ``stop_reason`` ``requires_action`` lists and that no ``user.custom_tool_result``
answers yet. It posts the handler's return value itself, as a ``user.custom_tool_result``
(``POST /v1/sessions/{id}/events``), and yields a ``DispatchedToolCall``.

The story, against a fake Sessions API that this script serves on 127.0.0.1 and keeps in
its own process (so it outlives the hosts):

1. Host process 1 runs ``send_email`` through the runner; the server holds the result
   POST without committing it and this script SIGKILLs host 1 while it waits.
2. Host process 2 attaches to the same session. The history still shows the call
   unanswered, so the runner dispatches it again.

With the handler guarded by the anthropic adapter's ``checkpointed_tool`` over a
``SQLiteStore`` file that both hosts open, host 2 answers with the result stored by host 1
and the e-mail goes out once. The bare handler sends it twice. The glue is two lines::

    @checkpointed_tool(store)
    def send_email(to: str) -> str: ...

    runner = session_client(client).beta.sessions.events.tool_runner(session_id, tools=...)

How the guard fits a runner that posts the result itself. The SDK calls the handler with
the tool's input and posts what it returns, so the delivery is the hand-back: the record
says "delivered" once the result is handed to the SDK, not once the session has it. The
session's own history is the authority on that: the runner dispatches a call again only
while the session still waits on it, which means the earlier hand-back never landed. So
the guard answers any dispatch of a call with a stored result from that result, whatever
phase the record is in, and never runs the tool again; a record left executing or
uncertain (a host died inside the tool) raises, and the runner posts an error result that
names the checkpoint's status, for a person to reconcile.

The call id. The runner hands the handler only the tool's input; the call is the
session's ``agent.custom_tool_use`` event, whose id the session keeps. The runner is made
from ``session_client(client)``, a copy of the client through which the guard reads the
event id of the call it serves (see the adapter's docstring): host 2 is dispatched the
same event, so it finds host 1's checkpoint, and two events with identical input are two
calls.

Run: python examples/anthropic_sessions.py [--variant checkpoint|bare] [--workdir DIR].
Without --variant it runs both and expects one e-mail with the checkpoint and two
without; it exits 1 when a count differs. Each host is this script, run as
``host BASE_URL NUMBER VARIANT WORKDIR``. Nothing leaves 127.0.0.1, and the API key is a
dummy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from anthropic import AsyncAnthropic
from anthropic.lib.tools import beta_tool

from tool_execution_checkpoint import CheckpointStore, SQLiteStore
from tool_execution_checkpoint.adapters.anthropic import checkpointed_tool, session_client

SESSION_ID = "sesn_example_01"
TOOL_USE_ID = "sevt_custom_tool_use_01"
ARGUMENTS: dict[str, Any] = {"to": "ada@example.com"}
DUMMY_API_KEY = "sk-ant-dummy-key-for-the-local-fake-server"
VARIANTS = {
    "checkpoint": "the handler guarded by checkpointed_tool over one SQLiteStore file",
    "bare": "the handler runs send_email itself, no checkpoint",
}
EXPECTED_EMAILS = {"checkpoint": 1, "bare": 2}
TIMEOUT = 60.0

# --- the tool and the wrapper ------------------------------------------------------------


def send_email(outbox: Path, to: str) -> dict[str, str]:
    """The tool's external effect: one line in the outbox file per e-mail sent."""
    with outbox.open("a", encoding="utf-8") as lines:
        lines.write(f"{to}\n")
    sent = len(outbox.read_text(encoding="utf-8").splitlines())
    return {"messageId": f"m-{sent}", "to": to}


def guarded(
    store: CheckpointStore, outbox: Path, log: Callable[[str], None]
) -> Callable[[str], str]:
    """``send_email`` as the SDK's handler, guarded: it runs at most once per call, and
    every dispatch is answered with the stored result."""

    @checkpointed_tool(store, name="send_email")
    def handler(to: str) -> str:
        result = send_email(outbox, to)
        log(f"checkpoint: ran send_email; handing {result} to the SDK")
        return json.dumps(result, sort_keys=True)

    return handler


def bare(outbox: Path, log: Callable[[str], None]) -> Callable[[str], str]:
    """``send_email`` as the SDK's handler, without a checkpoint: every dispatch runs it."""

    def handler(to: str) -> str:
        result = send_email(outbox, to)
        log(f"no checkpoint: ran send_email; handing {result} to the SDK")
        return json.dumps(result, sort_keys=True)

    return handler


# --- a host process ----------------------------------------------------------------------


def host_log(number: int) -> Callable[[str], None]:
    def log(line: str) -> None:
        print(f"host {number} | {line}", flush=True)

    return log


async def run_host(
    base_url: str, number: int, variant: str, store_path: Path, outbox: Path
) -> None:
    """One host: attach the SDK's session tool runner and answer the session's calls
    until the session goes idle at the end of its turn."""
    log = host_log(number)
    client = AsyncAnthropic(api_key=DUMMY_API_KEY, base_url=base_url, max_retries=0)
    with SQLiteStore(store_path) as store:
        handler = guarded(store, outbox, log) if variant == "checkpoint" else bare(outbox, log)
        tool = beta_tool(handler, name="send_email", description="Send an e-mail.")
        # The guarded handler needs the runner made from session_client(client).
        runs = session_client(client) if variant == "checkpoint" else client
        runner = runs.beta.sessions.events.tool_runner(SESSION_ID, tools=[tool], max_idle=0.5)
        async for call in runner:
            answered = "answered" if call.result is not None else "not answered"
            log(f"runner: {call.name} call {call.tool_use_id} {answered}, posted={call.posted}")
    await client.close()


# --- the fake Sessions API ---------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class FakeSessions(ThreadingHTTPServer):
    """A session on 127.0.0.1 whose agent makes the custom tool calls of ``turns`` (each
    turn a list of ``(event id, input)``; by default one call of ``send_email``), a turn at
    a time: it waits on a turn's calls, and once each has a result it begins the next turn,
    or ends its last. With ``hold_first_post``, the first result POST is held without being
    committed until ``release_post`` is set."""

    daemon_threads = True

    def __init__(
        self,
        turns: Sequence[Sequence[tuple[str, dict[str, Any]]]] = (((TOOL_USE_ID, ARGUMENTS),),),
        *,
        hold_first_post: bool = True,
    ) -> None:
        super().__init__(("127.0.0.1", 0), SessionsHandler)
        self.changed = threading.Condition()
        self.closing = False
        self.hold_next_post = hold_first_post
        self.post_arrived = threading.Event()
        self.release_post = threading.Event()
        self.results: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.turns = [list(turn) for turn in turns]
        self.waiting: set[str] = set()
        self.begin_turn()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def append(self, event: dict[str, Any], *, event_id: str | None = None) -> None:
        with self.changed:
            number = len(self.events) + 1
            self.events.append(
                {"id": event_id or f"sevt_{number:02d}", "processed_at": _now(), **event}
            )
            self.changed.notify_all()

    def events_after(self, seen: int) -> list[dict[str, Any]]:
        with self.changed:
            self.changed.wait_for(lambda: self.closing or len(self.events) > seen, timeout=0.5)
            return list(self.events[seen:])

    def begin_turn(self) -> None:
        """The agent's next turn: its calls and an idle that waits on them; or, after the
        last turn, its final message and an idle that ends the turn."""
        self.append({"type": "session.status_running"})
        if not self.turns:
            self.append({"type": "agent.message", "content": [{"type": "text", "text": "Sent."}]})
            self.append({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}})
            return
        calls = self.turns.pop(0)
        for event_id, arguments in calls:
            event = {"type": "agent.custom_tool_use", "name": "send_email", "input": arguments}
            self.append(event, event_id=event_id)
        self.waiting = {event_id for event_id, _ in calls}
        idle = {"type": "requires_action", "event_ids": [event_id for event_id, _ in calls]}
        self.append({"type": "session.status_idle", "stop_reason": idle})

    def accept(self, events: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        """Commit a result for a waiting call (the turn goes on once each has one); 400
        otherwise."""
        with self.changed:
            if len(events) != 1 or events[0].get("type") != "user.custom_tool_result":
                return 400, _error("invalid_request_error", "expected one custom tool result")
            if events[0].get("custom_tool_use_id") not in self.waiting:
                return 400, _error("invalid_request_error", "the session is not waiting on it")
            self.waiting.discard(events[0]["custom_tool_use_id"])
            self.results.append(events[0])
            self.append(events[0])
            committed = self.events[-1]
            if not self.waiting:
                self.begin_turn()
            return 200, {"data": [committed]}

    def close(self) -> None:
        with self.changed:
            self.closing = True
            self.changed.notify_all()
        self.shutdown()
        self.server_close()


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


class SessionsHandler(BaseHTTPRequestHandler):
    """The four requests the SDK's session tool runner makes."""

    server: FakeSessions

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the script prints the story

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == f"/v1/sessions/{SESSION_ID}/events/stream":
            self.stream()
        elif path == f"/v1/sessions/{SESSION_ID}/events":
            self.reply(200, {"data": list(self.server.events), "next_page": None})
        elif path == f"/v1/sessions/{SESSION_ID}":
            self.reply(200, {"id": SESSION_ID, "type": "session", "status": "idle"})
        else:
            self.reply(404, _error("not_found_error", path))

    def do_POST(self) -> None:
        if self.path.split("?")[0] != f"/v1/sessions/{SESSION_ID}/events":
            self.reply(404, _error("not_found_error", self.path))
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.server.hold_next_post:
            self.server.hold_next_post = False
            self.server.post_arrived.set()
            self.server.release_post.wait(TIMEOUT)
            self.close_connection = True
            return  # never committed, never answered: its host was killed meanwhile
        self.reply(*self.server.accept(body["events"]))

    def reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self) -> None:
        """Server-sent events: every event appended after the stream opened."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        seen = len(self.server.events)
        while not self.server.closing:
            events = self.server.events_after(seen)
            frames = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]
            try:
                self.wfile.write("".join(frames or ["event: ping\ndata: {}\n\n"]).encode())
                self.wfile.flush()
            except OSError:
                return  # the host is gone
            seen += len(events)


# --- the story ---------------------------------------------------------------------------


def start_host(base_url: str, number: int, variant: str, workdir: Path) -> subprocess.Popen[str]:
    """Host ``number`` as a process of its own: this script, run as ``host``."""
    command = [sys.executable, __file__, "host", base_url, str(number), variant, str(workdir)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def echo(output: str) -> None:
    print(output, end="", flush=True)


def kill_while_posting(server: FakeSessions, host: subprocess.Popen[str]) -> None:
    """Wait until the host's result POST reaches the server, then SIGKILL the host."""
    deadline = time.monotonic() + TIMEOUT
    while not server.post_arrived.wait(0.05):
        if host.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"host 1 ended (exit {host.returncode}) before posting a result")
    host.send_signal(signal.SIGKILL)
    echo(host.communicate(timeout=TIMEOUT)[0])
    print("server | host 1 was SIGKILLed while its result POST was held: nothing committed")


def run_variant(variant: str, workdir: Path) -> int:
    """Host 1 is killed while its result POST is held; host 2, on the same store file
    and session, finishes the call. Returns the number of e-mails sent."""
    workdir.mkdir(parents=True, exist_ok=True)
    outbox = workdir / "outbox.txt"
    print(f"== {variant}: {VARIANTS[variant]}", flush=True)
    server = FakeSessions()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hosts: list[subprocess.Popen[str]] = []
    try:
        hosts.append(start_host(server.base_url, 1, variant, workdir))
        kill_while_posting(server, hosts[0])
        server.release_post.set()
        hosts.append(start_host(server.base_url, 2, variant, workdir))
        echo(hosts[1].communicate(timeout=TIMEOUT)[0])
        if hosts[1].returncode != 0:
            raise SystemExit(f"host 2 exited with {hosts[1].returncode}")
    finally:
        for host in hosts:
            if host.poll() is None:
                host.kill()
                host.wait()
        server.release_post.set()
        server.close()
    for result in server.results:
        print(f"server | the session got: {result['content'][0]['text']}")
    sent = len(outbox.read_text(encoding="utf-8").splitlines()) if outbox.exists() else 0
    print(f"e-mails sent: {sent} (expected {EXPECTED_EMAILS[variant]})", flush=True)
    return sent


def main(argv: list[str] | None = None) -> int:
    arguments = argv if argv is not None else sys.argv[1:]
    if arguments[:1] == ["host"]:
        base_url, number, variant, workdir = arguments[1:]
        store, outbox = Path(workdir) / "checkpoints.db", Path(workdir) / "outbox.txt"
        asyncio.run(run_host(base_url, int(number), variant, store, outbox))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--variant", choices=list(VARIANTS))
    parser.add_argument("--workdir", type=Path)
    options = parser.parse_args(arguments)
    variants = [options.variant] if options.variant else list(VARIANTS)
    with tempfile.TemporaryDirectory() as scratch:
        base: Path = options.workdir or Path(scratch)
        counts = {variant: run_variant(variant, base / variant) for variant in variants}
    wrong = {v: n for v, n in counts.items() if n != EXPECTED_EMAILS[v]}
    if wrong:
        print(f"WRONG e-mail count: {wrong}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
