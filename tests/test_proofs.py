"""proofs/: the explorer and CrossHair at their fast bounds, and proof that both bite.

Each invariant is broken on purpose in a mutated copy of the core that the test writes
to a temporary directory (never committed), and the explorer or CrossHair must find the
counterexample there. A CrossHair crash must never pass and never count as a finding.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from broken_hosts import (
    ActsOnLostClaims,
    ReleasesAfterAnEffect,
    ReleasesUnknownDeliveries,
    ReportsOwnClaimAsLost,
    RerunsOnReconcile,
    RerunsUnlessFound,
    SendsItsOwnOvertakenResult,
    TrustsPostedMarks,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "proofs"))

from crosshair_check import Verdict, check, classify  # noqa: E402
from explore import BINDING, HAND_BACK, OPTIONS, explore  # noqa: E402

from tool_execution_checkpoint.runner import HostProtocol  # noqa: E402

ENGINE = "transitions/engine.py"
STEPS = "transitions/steps.py"
HAND_BACK_DELIVERED = "    delivered = begun.at if TABLE.composed[name].hand_back else None\n"
"""Where the composed completing steps' body records the hand-back step's delivery."""
COMPOSED_BEGIN = (
    "    begun = _begin(\n"
    "        name, record, at, max_payload_bytes, attempt_id=attempt_id, delivery_id=delivery_id\n"
    "    )\n"
)
"""The prologue of that body, which fences it."""

# invariant -> (file, original text, mutated text)
MUTANTS: dict[str, tuple[str, str, str]] = {
    "a foreign id finishes a claim": (
        ENGINE,
        "    if owner != claim_id:",
        "    if owner is None:",
    ),
    "decide says execute for a claimed record": (
        ENGINE,
        "        action=TABLE.statuses[checkpoint.status].action,",
        '        action=TABLE.statuses["ready"].action if checkpoint.status == "executing"'
        " else TABLE.statuses[checkpoint.status].action,",
    ),
    "an uncertain execution goes back to ready": (
        STEPS,
        "    return _advance(begun.rule, begun.record, begun.at, execution=execution)",
        '    ready = __import__("dataclasses").replace(begun.rule, target=TABLE.initial_status)\n'
        "    return _advance(ready, begun.record, begun.at, execution=None)",
    ),
    "a transition skips a revision": (
        ENGINE,
        "        revision + 1,",
        "        revision + 2,",
    ),
    "a completed record without its result": (
        STEPS,
        "    return _advance(begun.rule, begun.record, begun.at, result=stored)",
        "    return _advance(begun.rule, begun.record, begun.at, result=None)",
    ),
    "a delivery claimed with its result dropped": (
        STEPS,
        "    return _advance(begun.rule, begun.record, begun.at, result=stored, delivery=delivery)",
        "    return _advance(begun.rule, begun.record, begun.at, result=None, delivery=delivery)",
    ),
    "a composed delivery claim under another id than its parts make": (
        STEPS,
        "    delivery = checked_delivery(begun.delivery_id, begun.at, delivered)",
        "    delivery = checked_delivery(begun.attempt_id, begun.at, delivered)",
    ),
    "a hand-back step that lands without storing the payload": (
        STEPS,
        HAND_BACK_DELIVERED,
        HAND_BACK_DELIVERED + "    stored = None if delivered else stored\n",
    ),
    "a hand-back step that skips the fence": (
        STEPS,
        COMPOSED_BEGIN,
        "    owner = _load(record, max_payload_bytes).execution\n"
        "    if TABLE.composed[name].hand_back and owner is not None:\n"
        "        attempt_id = owner.attempt_id\n" + COMPOSED_BEGIN,
    ),
    "a hand-back step delivered at another time than its parts make": (
        STEPS,
        HAND_BACK_DELIVERED,
        HAND_BACK_DELIVERED.replace("begun.at if", '"2030-01-01T00:00:00Z" if'),
    ),
    "a foreign id releases a claim": (
        STEPS,
        '    begun = _begin("release_execution", record, at, max_payload_bytes,'
        " attempt_id=attempt_id)",
        "    stored = _load(record, max_payload_bytes).execution\n"
        "    owner = attempt_id if stored is None else stored.attempt_id\n"
        '    begun = _begin("release_execution", record, at, max_payload_bytes, attempt_id=owner)',
    ),
    "a changed binding is a cache hit": (
        ENGINE,
        "    if checkpoint.binding is not binding and checkpoint.binding != binding:",
        "    if checkpoint.binding.call_id != binding.call_id:",
    ),
}

EXPLORER_CATCHES = {
    "a foreign id finishes a claim": "let a foreign id finish the claim",
    "a foreign id releases a claim": "let a foreign id finish the claim",
    "decide says execute for a claimed record": "decide says execute",
    "an uncertain execution goes back to ready": "",
    "a transition skips a revision": "revision by more than one",
    "a completed record without its result": "INVALID_CHECKPOINT",
    "a delivery claimed with its result dropped": "INVALID_CHECKPOINT",
    "a hand-back step that skips the fence": "complete_and_deliver let a foreign id finish",
    "a hand-back step that lands without storing the payload": "INVALID_CHECKPOINT",
}

HAND_BACK_MUTANTS = frozenset({"a hand-back step that lands without storing the payload"})
"""The mutants only the host that hands back reaches (the explorer runs it for them)."""

CROSSHAIR_CATCHES = {
    "a foreign id finishes a claim": "properties.foreign_ids_never_finish_a_claim",
    "a foreign id releases a claim": "properties.no_claim_is_rearmed_but_by_its_owners_release",
    "decide says execute for a claimed record": (
        "properties.decide_answers_execute_only_for_ready_or_released"
    ),
    "an uncertain execution goes back to ready": (
        "properties.no_claim_is_rearmed_but_by_its_owners_release"
    ),
    "a transition skips a revision": "properties.next_validates_one_revision_on",
    "a completed record without its result": "properties.next_validates_one_revision_on",
    "a delivery claimed with its result dropped": "properties.next_validates_one_revision_on",
    "a composed delivery claim under another id than its parts make": (
        "properties.a_composed_step_is_its_parts_in_one_write"
    ),
    "a hand-back step that lands without storing the payload": (
        "properties.next_validates_one_revision_on"
    ),
    "a hand-back step that skips the fence": "properties.foreign_ids_never_finish_a_claim",
    "a hand-back step delivered at another time than its parts make": (
        "properties.a_composed_step_is_its_parts_in_one_write"
    ),
    "a changed binding is a cache hit": "properties.a_changed_binding_field_conflicts",
}


def mutant(tmp_path: Path, invariant: str) -> Path:
    """A copy of the core (src/ and spec/) with one invariant broken; returns its src/."""
    shutil.copytree(ROOT / "src", tmp_path / "src")
    shutil.copytree(ROOT / "spec", tmp_path / "spec")
    name, original, mutated = MUTANTS[invariant]
    path = tmp_path / "src" / "tool_execution_checkpoint" / name
    text = path.read_text(encoding="utf-8")
    assert text.count(original) == 1, f"the mutation site for {invariant!r} moved"
    path.write_text(text.replace(original, mutated), encoding="utf-8")
    return tmp_path / "src"


@pytest.mark.parametrize("host", ["sending", "hand-back"])
@pytest.mark.parametrize(("workers", "depth", "at_least"), [(2, 11, 60_000), (3, 8, 30_000)])
def test_the_explorer_finds_nothing_in_the_core_at_its_fast_bound(
    workers: int, depth: int, at_least: int, host: str
) -> None:
    """Both hosts: the one that sends its result, and the one whose delivery is the
    hand-back (the guard's two writes)."""
    if host == "sending":
        report = explore(workers=workers, depth=depth)
    else:
        report = explore(workers=workers, depth=depth, protocol=HAND_BACK)
    assert report.violation is None, report.trace
    assert report.states > at_least


@pytest.mark.parametrize("invariant", sorted(EXPLORER_CATCHES))
def test_the_explorer_catches_a_broken_invariant(invariant: str, tmp_path: Path) -> None:
    source = mutant(tmp_path, invariant)
    environment = {
        **os.environ,
        "PYTHONPATH": str(source),
        "TOOL_CHECKPOINT_CONTRACTS": "0",  # the explorer must find it on its own
    }
    explorer = [sys.executable, str(ROOT / "proofs" / "explore.py"), "--workers", "2"]
    host = ["--hand-back"] if invariant in HAND_BACK_MUTANTS else []
    run = subprocess.run(
        [*explorer, "--depth", "11", *host],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
        timeout=600,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "COUNTEREXAMPLE" in run.stdout
    assert EXPLORER_CATCHES[invariant] in run.stdout
    assert "  1. w0 creates executing@1" in run.stdout  # a readable trace of worker steps


BROKEN_HOSTS = {
    "acting on a lost claim": (ActsOnLostClaims, "the tool ran 2 times"),
    "rerunning on reconcile": (RerunsOnReconcile, "the tool ran 2 times"),
    "releasing a claim after the tool acted": (
        ReleasesAfterAnEffect,
        "an execution whose tool ran was released",
    ),
    "releasing a delivery of unknown outcome": (
        ReleasesUnknownDeliveries,
        "the payload arrived 2 times",
    ),
    "reporting a landed own claim as another worker's": (
        ReportsOwnClaimAsLost,
        "reported its own claim as another worker's",
    ),
    "rerunning when the reconcile hook cannot tell": (RerunsUnlessFound, "the tool ran 2 times"),
    "trusting a delivered mark sent unanswered": (
        TrustsPostedMarks,
        "reported a record the store never held",
    ),
}


SEEDED = [
    pytest.param(bug, hands_back, id=f"{bug}-{'hand-back' if hands_back else 'sending'}")
    for bug in sorted(BROKEN_HOSTS)
    for hands_back in (False, True)
    # A host that hands back sends only a record it finds completed (an operator's), and
    # two sends, or a send and its mark, are past the fast bound: the sending host shows
    # these bugs.
    if not (
        hands_back
        and bug
        in ("releasing a delivery of unknown outcome", "trusting a delivered mark sent unanswered")
    )
]


@pytest.mark.parametrize(("bug", "hands_back"), SEEDED)
def test_the_explorer_catches_a_seeded_runner_bug(bug: str, hands_back: bool) -> None:
    host, message = BROKEN_HOSTS[bug]
    protocol = host(BINDING, hands_back=hands_back, **OPTIONS)
    assert protocol.hands_back is hands_back
    report = explore(workers=2, depth=11, protocol=protocol)
    assert report.violation is not None
    assert message in report.violation
    assert report.trace[1].startswith("w0 creates executing@1")


@pytest.mark.parametrize("hands_back", [False, True], ids=["sending", "hand-back"])
def test_the_explorer_finds_one_answer_per_call_with_operators_racing_live_workers(
    hands_back: bool,
) -> None:
    protocol = HostProtocol(BINDING, hands_back=hands_back, **OPTIONS)
    report = explore(workers=2, depth=9, protocol=protocol, racing=True)
    assert report.violation is None, report.trace
    assert report.states > 100_000


@pytest.mark.parametrize("hands_back", [False, True], ids=["sending", "hand-back"])
def test_the_racing_explorer_catches_a_call_with_two_answers(hands_back: bool) -> None:
    host = SendsItsOwnOvertakenResult(BINDING, hands_back=hands_back, **OPTIONS)
    assert explore(workers=2, depth=9, protocol=host).violation is None  # operators wait
    report = explore(workers=2, depth=9, protocol=host, racing=True)
    assert report.violation is not None
    assert "another payload than the call's one answer" in report.violation
    assert any(label.startswith("operator completes") for label in report.trace)


@pytest.mark.parametrize("invariant", sorted(CROSSHAIR_CATCHES))
def test_crosshair_catches_a_broken_invariant(invariant: str, tmp_path: Path) -> None:
    outcome = check(
        CROSSHAIR_CATCHES[invariant], timeout=60, pythonpath=str(mutant(tmp_path, invariant))
    )
    assert outcome.verdict is Verdict.COUNTEREXAMPLE, outcome


def test_crosshair_passes_the_core_at_its_fast_bound() -> None:
    for target in CROSSHAIR_CATCHES.values():
        outcome = check(target, timeout=5)
        assert outcome.verdict is Verdict.PASSED, outcome
        assert outcome.confirmed or outcome.paths > 0


def test_a_crosshair_crash_is_neither_a_pass_nor_a_finding(tmp_path: Path) -> None:
    (tmp_path / "literal_target.py").write_text(
        "from typing import Literal\n"
        "import icontract\n\n\n"
        "@icontract.ensure(lambda result: result)\n"
        "def f(mode: Literal['a', 'b']) -> bool:\n"
        "    return True\n",
        encoding="utf-8",
    )
    outcome = check("literal_target.f", timeout=5, pythonpath=str(tmp_path))
    assert outcome.verdict is Verdict.CRASHED, outcome


def test_classify_reads_output_not_the_exit_code() -> None:
    finding = "/x/properties.py:9: error: false when calling f(1) (which returns False)"
    assert classify(1, finding, "")[0] is Verdict.COUNTEREXAMPLE
    assert classify(1, "", "Traceback (most recent call last):\nTypeError: x")[0] is Verdict.CRASHED
    assert classify(2, "", "")[0] is Verdict.CRASHED
    assert classify(0, "/x/p.py:3: info: Not confirmed.", "")[0] is Verdict.PASSED
    assert classify(0, "/x/p.py:3: error: cannot import", "")[0] is Verdict.CRASHED
