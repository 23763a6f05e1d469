"""Execution and delivery fencing together, against a minimal compare-and-swap store.

Two hosts race for the same tool call. Only the one whose claim's CAS wins runs the tool;
the other lost. Then two hosts race to deliver: only the delivery-claim winner sends. A
stale host that tries to finish a claim it does not own is refused (FENCE_CONFLICT), and
a stale write with an old revision loses its CAS. Run: python examples/cas_store.py
"""

import threading

from tool_execution_checkpoint import (
    Binding,
    CheckpointError,
    ErrorCode,
    checkpoint_key,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
)


class TinyCASStore:
    """The whole storage contract: create-if-absent, get, compare-and-swap, one lock.
    Nothing is flushed anywhere, so a swap's ``durable`` (False where the host may have
    it acknowledged before it is flushed) changes nothing here."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rows = {}  # key -> (revision, record as a dict)

    def create_if_absent(self, key, record):
        with self.lock:
            if key in self.rows:
                return False
            self.rows[key] = (record.revision, record.to_dict())
            return True

    def get(self, key):
        with self.lock:
            row = self.rows.get(key)
        return None if row is None else row[1]

    def compare_and_swap(self, key, expected_revision, record, *, durable=True):
        del durable
        with self.lock:
            if self.rows.get(key, (None,))[0] != expected_revision:
                return False
            self.rows[key] = (record.revision, record.to_dict())
            return True


store = TinyCASStore()
binding = Binding("example", "turn-1/call-1", "charge_card", "3", "sha256:9f2c")
key = checkpoint_key(binding)
now = "2026-12-02T12:00:00Z"
charges = []

store.create_if_absent(key, create_checkpoint(binding, created_at=now))
loaded = store.get(key)  # both hosts load the same ready record
claims = {
    host: claim_execution(loaded, attempt_id=f"{host}-attempt", at=now) for host in ("a", "b")
}
won = {host: store.compare_and_swap(key, t.expected_revision, t.next) for host, t in claims.items()}
assert sorted(won.values()) == [False, True], "exactly one claim wins"
winner = next(host for host, ok in won.items() if ok)
loser = "b" if winner == "a" else "a"
try:  # the loser, out of date, tries to finish the winner's claim: the fence refuses
    complete_execution(store.get(key), attempt_id=f"{loser}-attempt", at=now, result={})
except CheckpointError as error:
    refused = error.code
else:
    refused = None
assert refused is ErrorCode.FENCE_CONFLICT
charges.append(winner)  # only the winner runs the tool
done = complete_execution(
    claims[winner].next, attempt_id=f"{winner}-attempt", at=now, result={"charge": "ch_1"}
)
assert store.compare_and_swap(key, done.expected_revision, done.next)
stale = claims[loser]  # its old claim, replayed with its old revision
assert store.compare_and_swap(key, stale.expected_revision, stale.next) is False

record = store.get(key)
assert decide_checkpoint(record, binding).action.value == "deliver"
deliveries = {
    host: claim_delivery(record, delivery_id=f"{host}-delivery", at=now) for host in ("a", "b")
}
sent = []
for host, claim in deliveries.items():
    if store.compare_and_swap(key, claim.expected_revision, claim.next):
        sent.append((host, claim.next.result.payload))  # only the delivery winner sends
        finish = complete_delivery(claim.next, delivery_id=f"{host}-delivery", at=now)
        assert store.compare_and_swap(key, finish.expected_revision, finish.next)
    else:  # its claim did not land, so finishing from it loses the CAS as well
        late = complete_delivery(claim.next, delivery_id=f"{host}-delivery", at=now)
        assert store.compare_and_swap(key, late.expected_revision, late.next) is False

assert charges == [winner], "the card was charged once"
assert [payload for _, payload in sent] == [{"charge": "ch_1"}], "the result was sent once"
assert store.get(key)["status"] == "delivered"
print(f"host {winner} charged the card once; host {sent[0][0]} delivered the stored result once")
