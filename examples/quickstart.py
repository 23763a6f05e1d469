"""The README's quick start: one tool call, a failed result POST, a restart, no second e-mail.

The store is a table in SQLite (standard library): create-if-absent is one INSERT ... ON
CONFLICT DO NOTHING, the compare-and-swap is one UPDATE ... WHERE revision = ?.
"""

import hashlib
import json
import sqlite3
import uuid

from tool_execution_checkpoint import (
    Action,
    Binding,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
    release_delivery,
)

db = sqlite3.connect(":memory:", isolation_level=None)
db.execute("CREATE TABLE checkpoint (key TEXT PRIMARY KEY, revision INTEGER, record TEXT)")


def create_if_absent(key, record):
    sql = "INSERT INTO checkpoint VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
    return db.execute(sql, (key, record.revision, record.to_json())).rowcount == 1


def load(key):
    (text,) = db.execute("SELECT record FROM checkpoint WHERE key = ?", (key,)).fetchone()
    return json.loads(text)


def cas(key, transition):
    """Swap in transition.next if the stored revision is still the expected one."""
    row = (transition.next.revision, transition.next.to_json(), key, transition.expected_revision)
    sql = "UPDATE checkpoint SET revision = ?, record = ? WHERE key = ? AND revision = ?"
    return db.execute(sql, row).rowcount == 1


emails_sent = []  # the tool's external effect
delivered = []  # what the model provider received


def send_email(to):
    emails_sent.append(to)
    return {"messageId": f"m-{len(emails_sent)}", "to": to}


def post_tool_result(payload, connection_up):
    if not connection_up:
        raise ConnectionRefusedError("the provider refused the connection")
    delivered.append(payload)


arguments = {"to": "ada@example.com"}
digest = hashlib.sha256(json.dumps(arguments, sort_keys=True).encode()).hexdigest()
binding = Binding(
    namespace="quickstart",
    call_id="conversation-42/turn-7/call-1",  # an id the application owns, not the provider's
    tool_name="send_email",
    tool_revision="1",
    input_fingerprint=f"sha256:{digest}",
)
key = "quickstart/conversation-42/turn-7/call-1"
now = "2026-12-02T12:00:00Z"


def handle_tool_call(connection_up):
    """What a host runs for a tool call, first time and after every reconnect alike."""
    create_if_absent(key, create_checkpoint(binding, created_at=now))
    decision = decide_checkpoint(load(key), binding)
    print(f"decide: {decision.status} at revision {decision.revision} -> {decision.action}")
    if decision.action is Action.EXECUTE:
        attempt = str(uuid.uuid4())
        claim = claim_execution(decision.checkpoint, attempt_id=attempt, at=now)
        if not cas(key, claim):
            return  # another worker claimed the execution: it runs the tool, not us
        payload = send_email(arguments["to"])  # the one execution
        done = complete_execution(claim.next, attempt_id=attempt, at=now, result=payload)
        if not cas(key, done):
            return  # cannot happen to the owning attempt with an honest store; reload
        decision = decide_checkpoint(done.next, binding)
    if decision.action is Action.DELIVER:
        delivery_id = str(uuid.uuid4())
        claim = claim_delivery(decision.checkpoint, delivery_id=delivery_id, at=now)
        if not cas(key, claim):
            return  # another worker is delivering
        try:
            post_tool_result(claim.next.result.payload, connection_up)
        except ConnectionRefusedError:
            # Known not sent: release, so the next run delivers the same stored payload.
            cas(key, release_delivery(claim.next, delivery_id=delivery_id, at=now))
            print("delivery failed; the result stays stored")
            return
        cas(key, complete_delivery(claim.next, delivery_id=delivery_id, at=now))
        print("delivered the stored result")


handle_tool_call(connection_up=False)  # the tool runs, then the result POST fails
handle_tool_call(connection_up=True)  # after the reconnect: deliver, never execute again
handle_tool_call(connection_up=True)  # a late duplicate: nothing left to do

assert emails_sent == ["ada@example.com"], "the tool ran more than once"
assert delivered == [{"messageId": "m-1", "to": "ada@example.com"}]
print(f"e-mails sent: {len(emails_sent)}; results delivered: {len(delivered)}")
