"""A retried Messages API turn gets a new tool_use id: key the call by the application's id.

The real ``anthropic`` SDK's ``client.messages.create`` talks to a fake Messages API that
this script serves on 127.0.0.1. Turn 7 of conversation conv-42:

1. The host sends the user's request; the model answers with a ``tool_use`` block,
   ``toolu_A``, for ``send_email``. The host runs the tool through ``run_once``, whose
   ``deliver`` sends the next request, carrying the ``tool_result``. That POST fails
   (the server answers 500 and drops the request). The host declares that an answered
   error status means "not sent" (``not_sent=(APIStatusError,)``; a timeout would leave
   the delivery to reconcile), so ``run_once`` releases the delivery and reports
   ``delivery-failed``; the result stays stored.
2. The host retries the whole turn: it sends the user's request again, and the model
   answers with a new ``tool_use`` block for the same call, ``toolu_B`` (a ``tool_result``
   must name the ``tool_use`` of its own request, so the old id cannot be reused).

With the binding keyed by the application's call id (the call's place in
``conv-42/turn-7``, named before the first attempt: its intent and occurrence, as
``call_scope`` numbers a guarded tool's calls; see the README's "Which call is which"),
the retried turn finds the stored result and delivers it under ``toolu_B``: one e-mail.
Keyed by the provider's ``tool_use`` id, the retry finds no record and sends a second
e-mail.

The SDK's own retries are off (``max_retries=0``): the host retries the turn itself, and
every request the server saw is counted and printed.

Run: python examples/messages_retry.py [--keying app|provider] [--workdir DIR]. Without
--keying it runs both and expects one e-mail keyed by the application's id and two keyed
by the provider's; it exits 1 when a count differs. Nothing leaves 127.0.0.1, and the API
key is a dummy.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from anthropic import Anthropic, APIError, APIStatusError
from anthropic.types import Message, MessageParam, TextBlock, ToolParam, ToolUseBlock

from tool_execution_checkpoint import (
    Binding,
    CallScope,
    CheckpointStore,
    Intent,
    JSONValue,
    RunOutcome,
    RunStatus,
    SQLiteStore,
    arguments_fingerprint,
    run_once,
)

CONVERSATION_ID, TURN = "conv-42", 7
MODEL = "claude-sonnet-4-5"
PROMPT: MessageParam = {"role": "user", "content": "E-mail Ada that her invoice is paid."}
SEND_EMAIL: ToolParam = {
    "name": "send_email",
    "description": "Send an e-mail.",
    "input_schema": {"type": "object", "properties": {"to": {"type": "string"}}},
}
DUMMY_API_KEY = "sk-ant-dummy-key-for-the-local-fake-server"
KEYINGS = {
    "app": "keyed by the application's call id",
    "provider": "keyed by the provider's tool_use id",
}
EXPECTED_EMAILS = {"app": 1, "provider": 2}
ATTEMPTS = 3


# --- the tool and the host ----------------------------------------------------------------


def send_email(outbox: Path, to: str) -> dict[str, str]:
    """The tool's external effect: one line in the outbox file per e-mail sent."""
    with outbox.open("a", encoding="utf-8") as lines:
        lines.write(f"{to}\n")
    sent = len(outbox.read_text(encoding="utf-8").splitlines())
    return {"messageId": f"m-{sent}", "to": to}


def binding_for(keying: str, scope: CallScope, tool_use: ToolUseBlock) -> Binding:
    """The call's binding. ``app``: the call's id in the turn's scope, named by the
    application before the first attempt: ``<turn>/<tool>/<intent digest>/<n>``, the n-th
    call of this intent in the attempt (see the README's "Which call is which"), the same
    on every attempt. ``provider``: the model's tool_use id, new on every attempt."""
    arguments = arguments_fingerprint(tool_use.input)
    app_call_id, _ = scope.take(Intent(tool_use.name, "1", arguments))
    return Binding(
        namespace="messages-retry-example",
        call_id=app_call_id if keying == "app" else tool_use.id,
        tool_name=tool_use.name,
        tool_revision="1",
        input_fingerprint=arguments,
    )


def ask(client: Anthropic, messages: list[MessageParam]) -> Message:
    """One request to the Messages API (the SDK's own retries are off)."""
    return client.messages.create(
        model=MODEL, max_tokens=256, tools=[SEND_EMAIL], messages=messages
    )


def tool_result_turn(tool_use: ToolUseBlock, payload: JSONValue) -> list[MessageParam]:
    """The request after a tool call: the call, then its result under the call's id."""
    return [
        PROMPT,
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": tool_use.id,
                    "name": tool_use.name,
                    "input": tool_use.input,
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tool_use.id,
                    "content": json.dumps(payload, sort_keys=True),
                }
            ],
        },
    ]


def run_turn(
    client: Anthropic, store: CheckpointStore, keying: str, outbox: Path, log: Callable[[str], None]
) -> RunOutcome:
    """One attempt at the turn: ask the model, run its tool call through ``run_once``,
    whose delivery is the next request with the stored result."""
    scope = CallScope(f"{CONVERSATION_ID}/turn-{TURN}")  # a fresh count on every attempt
    reply = ask(client, [PROMPT])
    tool_use = next(block for block in reply.content if isinstance(block, ToolUseBlock))
    log(f"the model asked for {tool_use.name} {tool_use.input} as {tool_use.id}")

    def deliver(payload: JSONValue) -> None:
        try:
            answer = ask(client, tool_result_turn(tool_use, payload))
        except APIError as error:
            log(f"the POST of {payload} as {tool_use.id} failed: {type(error).__name__}")
            raise  # an APIStatusError is "not sent": the result stays stored
        said = " ".join(block.text for block in answer.content if isinstance(block, TextBlock))
        log(f"delivered {payload} as {tool_use.id}; the model said {said!r}")

    to = str(tool_use.input["to"])
    outcome = run_once(
        store,
        binding_for(keying, scope, tool_use),
        lambda: send_email(outbox, to),
        deliver,
        not_sent=(APIStatusError,),  # the server answered with an error: it took nothing
    )
    log(f"run_once: {outcome.status.value} (ran the tool: {outcome.ran_tool})")
    return outcome


# --- the fake Messages API ---------------------------------------------------------------


class FakeMessages(ThreadingHTTPServer):
    """One conversation on 127.0.0.1. A request that ends with the user's prompt gets a
    tool_use with a fresh id (toolu_A, toolu_B, ...). A request that carries a
    tool_result must name the tool_use of its own request (400 otherwise); the first
    such request fails with 500 and is dropped, the later ones get the final answer."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), MessagesHandler)
        self.lock = threading.Lock()
        self.requests = 0
        self.tool_use_ids = iter(f"toolu_{letter}" for letter in "ABCDEFGH")
        self.fail_next_result = True
        self.results: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer(self, messages: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests += 1
            last = messages[-1]["content"]
            blocks = [] if isinstance(last, str) else last
            results = [block for block in blocks if block["type"] == "tool_result"]
            if not results:  # the user's prompt, as text or as text blocks
                return 200, _message([_tool_use(next(self.tool_use_ids))], "tool_use")
            result = results[0]
            asked = [b["id"] for b in messages[-2]["content"] if b["type"] == "tool_use"]
            if result["tool_use_id"] not in asked:
                return 400, _error("invalid_request_error", "tool_result without its tool_use")
            if self.fail_next_result:
                self.fail_next_result = False
                return 500, _error("api_error", "Internal server error")
            self.results.append(result)
            return 200, _message(
                [{"type": "text", "text": "Done: Ada has her e-mail."}], "end_turn"
            )


def _tool_use(tool_use_id: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": tool_use_id,
        "name": "send_email",
        "input": {"to": "ada@example.com"},
    }


def _message(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_example",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


class MessagesHandler(BaseHTTPRequestHandler):
    """``POST /v1/messages``, the one request ``client.messages.create`` makes."""

    server: FakeMessages

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the script prints the story

    def do_POST(self) -> None:
        if self.path.split("?")[0] != "/v1/messages":
            status, body = 404, _error("not_found_error", self.path)
        else:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, body = self.server.answer(request["messages"])
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# --- the story ---------------------------------------------------------------------------


def run_keying(keying: str, workdir: Path) -> int:
    """Attempt the turn until its result is delivered. Returns the e-mails sent."""
    workdir.mkdir(parents=True, exist_ok=True)
    outbox = workdir / "outbox.txt"
    print(f"== {keying}: {KEYINGS[keying]}", flush=True)
    server = FakeMessages()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = Anthropic(api_key=DUMMY_API_KEY, base_url=server.base_url, max_retries=0)
    try:
        with SQLiteStore(workdir / "checkpoints.db") as store:
            for attempt in range(1, ATTEMPTS + 1):
                log = attempt_log(attempt)
                outcome = run_turn(client, store, keying, outbox, log)
                if outcome.status is not RunStatus.DELIVERY_FAILED:
                    break
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    print(f"server | {server.requests} requests; tool results accepted: {len(server.results)}")
    sent = len(outbox.read_text(encoding="utf-8").splitlines()) if outbox.exists() else 0
    print(f"e-mails sent: {sent} (expected {EXPECTED_EMAILS[keying]})", flush=True)
    return sent


def attempt_log(attempt: int) -> Callable[[str], None]:
    def log(line: str) -> None:
        print(f"attempt {attempt} | {line}", flush=True)

    return log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keying", choices=list(KEYINGS))
    parser.add_argument("--workdir", type=Path)
    options = parser.parse_args(argv)
    keyings = [options.keying] if options.keying else list(KEYINGS)
    with tempfile.TemporaryDirectory() as scratch:
        base: Path = options.workdir or Path(scratch)
        counts = {keying: run_keying(keying, base / keying) for keying in keyings}
    wrong = {k: n for k, n in counts.items() if n != EXPECTED_EMAILS[k]}
    if wrong:
        print(f"WRONG e-mail count: {wrong}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
