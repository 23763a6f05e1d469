"""One full lifecycle through the pure core, against building the same records as dicts.

The lifecycle: create, decide, claim the execution, decide, complete it with a 1 KiB
payload, decide, claim the delivery, decide, record the delivery (five records, four
decisions). The baseline builds the same five records as plain dicts, with the same
checks a host makes before each step (status and binding), and one ``json.dumps`` of
the payload, since a store must encode it anyway. Both run in paired rounds in the same
process, and the figure is the median per-round ratio.

Contracts are read when the library is imported, so each setting runs in a subprocess
of its own: ``TOOL_CHECKPOINT_CONTRACTS=1`` (icontract postconditions on, as in the
tests and proofs) and ``TOOL_CHECKPOINT_CONTRACTS=0`` (off: the default, and always
under ``python -O``). The lifecycle is the core's separate transitions, five records;
``run_once`` writes the same protocol in three (see stores.py). It calls the transitions
and ``decide_checkpoint`` itself on purpose: it measures the pure core alone, with no
store and no runner.

    python benchmarks/core_lifecycle.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import icontract
from _measure import (
    Figure,
    calibrate,
    compare,
    paired_rounds,
    per_call,
    print_table,
    run_with_contracts,
    write_json,
)

from tool_execution_checkpoint import (
    Action,
    Binding,
    claim_delivery,
    claim_execution,
    complete_delivery,
    complete_execution,
    create_checkpoint,
    decide_checkpoint,
)
from tool_execution_checkpoint.errors import ErrorCode
from tool_execution_checkpoint.transitions import CONTRACTS_ENABLED
from tool_execution_checkpoint.validation import check_identifier, check_json_shape, check_timestamp

NOW = "2026-01-01T00:00:00Z"
TARGETS = {"on": 5.0, "off": 2.0}


def _payload() -> dict[str, Any]:
    """A small tool result, nested like a real one, of exactly 1,024 bytes of JSON."""
    payload: dict[str, Any] = {
        "status": 200,
        "items": [
            {"id": number, "name": f"item {number}", "price": 9.5 + number, "ok": True}
            for number in range(6)
        ],
        "note": "",
    }
    size = len(json.dumps(payload, separators=(",", ":")))
    payload["note"] = "n" * (1024 - size)
    return payload


PAYLOAD = _payload()
assert len(json.dumps(PAYLOAD, separators=(",", ":")).encode()) == 1024


def library_lifecycle() -> Callable[[], None]:
    """The lifecycle through the library."""
    binding = Binding("bench", "call-1", "tool", "1", "sha256:0")

    def lifecycle() -> None:
        created = create_checkpoint(binding, created_at=NOW)
        assert decide_checkpoint(created, binding).action is Action.EXECUTE
        claim = claim_execution(created, attempt_id="attempt-1", at=NOW).next
        assert decide_checkpoint(claim, binding).action is Action.RECONCILE_EXECUTION
        done = complete_execution(claim, attempt_id="attempt-1", at=NOW, result=PAYLOAD).next
        assert decide_checkpoint(done, binding).action is Action.DELIVER
        delivery = claim_delivery(done, delivery_id="delivery-1", at=NOW).next
        assert decide_checkpoint(delivery, binding).action is Action.RECONCILE_DELIVERY
        complete_delivery(delivery, delivery_id="delivery-1", at=NOW)

    return lifecycle


BINDING = {
    "namespace": "bench",
    "callId": "call-1",
    "toolName": "tool",
    "toolRevision": "1",
    "inputFingerprint": "sha256:0",
}


def _decide(record: dict[str, Any], status: str) -> None:
    if record["status"] != status or record["binding"] != BINDING:
        raise AssertionError("unexpected record")


def dict_lifecycle() -> None:
    """The baseline: the same five records as plain dicts."""
    created = {
        "schemaVersion": 1,
        "revision": 1,
        "status": "ready",
        "binding": dict(BINDING),
        "createdAt": NOW,
        "updatedAt": NOW,
        "execution": None,
        "result": None,
        "delivery": None,
    }
    _decide(created, "ready")
    execution = {"attemptId": "attempt-1", "claimedAt": NOW, "uncertain": None}
    claim = {**created, "revision": 2, "status": "executing", "execution": execution}
    _decide(claim, "executing")
    text = json.dumps(PAYLOAD, ensure_ascii=False, separators=(",", ":"))
    result = {"payload": text, "completedAt": NOW, "prunedAt": None}
    done = {**claim, "revision": 3, "status": "completed", "result": result}
    _decide(done, "completed")
    delivery = {"deliveryId": "delivery-1", "claimedAt": NOW, "deliveredAt": None}
    delivering = {**done, "revision": 4, "status": "delivering", "delivery": delivery}
    _decide(delivering, "delivering")
    finished = {**delivery, "deliveredAt": NOW}
    delivered = {**delivering, "revision": 5, "status": "delivered", "delivery": finished}
    _decide(delivered, "delivered")


def checks_alone() -> None:
    """The checks the core makes on the lifecycle's arguments, and nothing else: five
    timestamps against the RFC 3339 profile, four claim ids, and the payload's walk
    (its encoding is in the baseline already). Part of the core's cost over the plain
    dicts, which check nothing."""
    for _ in range(5):
        check_timestamp(NOW, "at", ErrorCode.INVALID_ARGUMENT)
    for claim in ("attempt-1", "attempt-1", "delivery-1", "delivery-1"):
        check_identifier(claim, "claim", ErrorCode.INVALID_ARGUMENT)
    check_json_shape(PAYLOAD, "payload")


def icontract_floor() -> Callable[[], None]:
    """icontract's own cost for the lifecycle's calls: four no-op transitions decorated as
    the library's are (a snapshot of the input and one postcondition) and five no-op
    decides with one postcondition, each condition trivially true. No core can run its
    contracts through icontract for less."""

    def snapshot_of(record: object) -> object:
        return record

    def kept(OLD: Any, record: object, result: object) -> bool:
        return OLD.record is record and result is record

    def decided(result: object) -> bool:
        return result is not None

    def broken(result: object) -> AssertionError:
        return AssertionError(f"broken: {type(result).__name__}")

    @icontract.snapshot(snapshot_of, name="record")
    @icontract.ensure(kept, "kept", error=broken)
    def transition(record: object, **_arguments: str) -> object:
        return record

    @icontract.ensure(decided, "decided", error=broken)
    def decide(record: object, _binding: object) -> object:
        return record

    def calls() -> None:
        record: object = BINDING
        for _ in range(4):
            decide(record, BINDING)
            record = transition(record, claim_id="attempt-1", at=NOW)
        decide(record, BINDING)

    return calls


def measure(rounds: int, seconds: float) -> dict[str, Any]:
    """Paired rounds in this process, under whatever contract setting it was started
    with (the environment it was started with decided it, at import)."""
    library = library_lifecycle()
    runs = {"dicts": dict_lifecycle, "core": library, "checks": checks_alone}
    if CONTRACTS_ENABLED:
        runs["icontract_floor"] = icontract_floor()
    counts = {name: calibrate(run, seconds) for name, run in runs.items()}
    samples = paired_rounds(
        {name: functools.partial(per_call, run, counts[name]) for name, run in runs.items()},
        rounds,
    )
    paired = compare(samples, "dicts")
    result = {
        "contracts_enabled": CONTRACTS_ENABLED,
        "rounds": rounds,
        "calls_per_round": counts,
        "core_us": round(paired.us("core"), 3),
        "dicts_us": round(paired.us("dicts"), 3),
        "ratio": round(paired.ratios["core"], 3),
    }
    result["checks_us"] = round(paired.us("checks"), 3)
    result["checks_ratio"] = round(paired.ratios["checks"], 3)
    if CONTRACTS_ENABLED:
        result["icontract_floor_us"] = round(paired.us("icontract_floor"), 3)
        result["icontract_floor_ratio"] = round(paired.ratios["icontract_floor"], 3)
    return result


def in_subprocess(contracts: bool, rounds: int, seconds: float) -> dict[str, Any]:
    """Run :func:`measure` in a fresh interpreter with contracts on or off."""
    command = [str(Path(__file__).resolve()), "--worker", "--rounds", str(rounds)]
    command += ["--seconds", str(seconds)]
    result: dict[str, Any] = json.loads(run_with_contracts(contracts, command, timeout=600))
    if result["contracts_enabled"] is not contracts:
        raise RuntimeError(f"contracts were {result['contracts_enabled']}, not {contracts}")
    return result


def run(quick: bool = False) -> tuple[list[Figure], dict[str, Any]]:
    """The two figures (contracts on, off) and the raw results."""
    rounds, seconds = (5, 0.01) if quick else (21, 0.05)
    details = {
        setting: in_subprocess(setting == "on", rounds, seconds) for setting in ("on", "off")
    }
    figures = [
        Figure(
            key=f"core.lifecycle.contracts_{setting}",
            label=f"core lifecycle, contracts {setting}",
            value=result["core_us"],
            unit="µs",
            baseline=result["dicts_us"],
            baseline_label="plain dicts",
            ratio=result["ratio"],
            target=TARGETS[setting],
            note="create, claim, complete (1 KiB), claim delivery, delivered; decide before each",
            details=result,
        )
        for setting, result in details.items()
    ]
    off, on = details["off"], details["on"]
    figures.append(
        Figure(
            key="core.lifecycle.checks_alone",
            label="the core's argument checks alone",
            value=off["checks_us"],
            unit="µs",
            baseline=off["dicts_us"],
            baseline_label="plain dicts",
            ratio=off["checks_ratio"],
            note="5 timestamps, 4 claim ids and the payload walk, which the dicts skip",
            details={"rounds": off["rounds"]},
        )
    )
    figures.append(
        Figure(
            key="core.lifecycle.icontract_floor",
            label="icontract alone, same 9 calls",
            value=on["icontract_floor_us"],
            unit="µs",
            baseline=on["dicts_us"],
            baseline_label="plain dicts",
            ratio=on["icontract_floor_ratio"],
            note="no-op functions decorated as the core's are: the least any core pays "
            "for running its contracts through icontract",
            details={"rounds": on["rounds"]},
        )
    )
    return figures, details


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few, short rounds")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=21, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=0.05, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.rounds, args.seconds)))
        return
    figures, details = run(args.quick)
    print_table(figures)
    if args.json:
        write_json(args.json, figures, {"core_lifecycle": details})


if __name__ == "__main__":
    main()
