"""The transition table in spec/: its loader's checks and the files rendered from it."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tool_execution_checkpoint import TABLE, Action, Status
from tool_execution_checkpoint.rendering import (
    render_markdown,
    render_mermaid,
    render_schema,
    render_troubleshooting,
    rendered_files,
)
from tool_execution_checkpoint.table import (
    NULLABLE_PARTS,
    RECORD_FIELDS,
    Fence,
    SpecError,
    load_table,
    spec_file,
    table_from_data,
)

ROOT = Path(__file__).resolve().parents[1]
TABLE_TEXT = (ROOT / "spec" / "transitions.toml").read_text(encoding="utf-8")
Mutation = Callable[[dict[str, Any]], None]


def _data() -> dict[str, Any]:
    return tomllib.loads(TABLE_TEXT)


def test_the_package_loads_the_repository_table() -> None:
    assert Path(str(spec_file("transitions.toml"))) == ROOT / "spec" / "transitions.toml"
    assert load_table(TABLE_TEXT) == TABLE


@pytest.mark.parametrize("path", sorted(rendered_files(ROOT)), ids=lambda p: p.name)
def test_rendered_file_is_fresh(path: Path) -> None:
    expected = rendered_files(ROOT)[path]
    assert path.read_text(encoding="utf-8") == expected, f"{path} is stale: run `make spec`"


def test_render_check_command_reports_a_stale_file(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "spec", tmp_path / "spec")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    command = [sys.executable, "-m", "tool_execution_checkpoint.rendering", "--check"]
    fresh = subprocess.run(
        [*command, "--root", str(tmp_path)], check=False, capture_output=True, text=True
    )
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    spec_page = tmp_path / "docs" / "spec.md"
    spec_page.write_text(spec_page.read_text(encoding="utf-8") + "\nhand edit\n")
    stale = subprocess.run(
        [*command, "--root", str(tmp_path)], check=False, capture_output=True, text=True
    )
    assert stale.returncode == 1
    assert "stale" in stale.stdout
    assert "spec.md" in stale.stdout


def test_rendering_follows_the_table() -> None:
    data = _data()
    data["statuses"]["completed"]["meaning"] = "A changed meaning."
    changed = table_from_data(data)
    assert "A changed meaning." in render_markdown(changed)
    assert render_markdown(changed) != render_markdown(TABLE)


def test_markdown_lists_every_status_transition_limit_and_promise() -> None:
    text = render_markdown(TABLE)
    for rule in TABLE.statuses.values():
        assert f"| `{rule.status}` | `{rule.action}` |" in text
    for transition in TABLE.transitions.values():
        assert f"| `{transition.name}` |" in text
    assert f"{TABLE.limits.default_max_payload_bytes:,} bytes" in text
    assert f"{TABLE.limits.ceiling_max_payload_bytes:,} bytes" in text
    for promise in (*TABLE.guarantees, *TABLE.non_guarantees):
        assert f"- {promise}" in text
    assert "](assets/states.svg)" in text
    assert "```mermaid" not in text  # a CDN script would draw it: the site shows the SVG
    troubleshooting = render_troubleshooting(TABLE)
    for code in TABLE.errors:
        assert f"## `{code}`" in troubleshooting


def test_mermaid_has_exactly_one_edge_per_source_of_each_transition() -> None:
    lines = render_mermaid(TABLE).splitlines()
    edges = {line.strip() for line in lines[1:]}
    expected = {
        f"{source} --> {rule.target}: {rule.name}"
        for rule in TABLE.transitions.values()
        for source in rule.sources
    }
    expected.add(f"[*] --> {TABLE.initial_status}: create_checkpoint")
    expected |= {f"{rule.status} --> [*]" for rule in TABLE.statuses.values() if rule.terminal}
    expected |= {
        f"{source} --> {step.target}: {step.name}"
        for step in TABLE.composed.values()
        for source in (step.sources or ("[*]",))
    }
    assert "[*] --> executing: create_claimed" in expected
    assert edges == expected
    assert len(lines) - 1 == len(expected)


def test_schema_is_a_valid_2020_12_schema_and_follows_the_table() -> None:
    schema = render_schema(TABLE)
    Draft202012Validator.check_schema(schema)
    assert schema["properties"]["status"]["enum"] == [str(s) for s in TABLE.statuses]
    shipped = json.loads(spec_file("record.schema.json").read_text(encoding="utf-8"))
    assert shipped == schema


def _add_reset(data: dict[str, Any]) -> None:
    reset = copy.deepcopy(data["transitions"]["claim_execution"])
    reset.update({"from": ["executing"], "to": "ready", "fence": "attemptId", "grants": "none"})
    data["transitions"]["reset_execution"] = reset


def _set(path: str, value: object) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[leaf] = value

    return mutate


def _both(*mutations: Mutation) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        for mutation in mutations:
            mutation(data)

    return mutate


CHAIN = "composed.complete_and_claim_delivery"


def _add_peek(data: dict[str, Any]) -> None:
    """A transition completed -> completed that grants deliver (a claim that stores
    nothing): safe alone, but a composed step may grant only in its last part."""
    peek = copy.deepcopy(data["transitions"]["claim_delivery"])
    peek.update({"to": "completed", "sets": []})
    data["transitions"]["peek"] = peek


PARTS_OF_THE_TABLE = f"{CHAIN}: composes two or more parts of the table, create first"
ONE_FENCE_ONE_GRANT = f"{CHAIN}: only its first part may be fenced, only its last grant"
HAND_BACK = "composed.complete_and_deliver"
GRANTS_BEFORE_ITS_LAST = f"{HAND_BACK}: a hand-back step grants deliver in one part before its last"
ALL_DURABLE = (
    "a composed step is durable, so all its parts must be, but those a hand-back step takes"
    " after its grant"
)


def _add_stamp(data: dict[str, Any]) -> None:
    """A transition delivered -> delivered fenced by the attempt id (a note the owning
    attempt adds): safe alone, but a hand-back step's parts after its grant may be fenced
    only by the claim the grant made."""
    stamp = copy.deepcopy(data["transitions"]["prune_result"])
    stamp.update({"fence": "attemptId", "requires_null": [], "sets": []})
    data["transitions"]["stamp"] = stamp


def _delete(path: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        del node[leaf]

    return mutate


TRANSITION_KEYS = (
    "['clears', 'durable', 'fence', 'from', 'grants', 'meaning', 'requires_null', 'sets', 'to']"
)
COMPOSED_KEYS = "['composes', 'from', 'hand_back', 'meaning', 'recovery']"
STATUS_KEYS = "['action', 'forbidden', 'meaning', 'required', 'terminal']"
TOP_KEYS = (
    "['composed', 'errors', 'limits', 'promises', 'protocol', 'statuses', 'timestamps',"
    " 'transitions']"
)
PROTOCOL_KEYS = (
    "['format_why', 'hand_back', 'initial_revision', 'initial_revision_why', 'initial_status',"
    " 'schema_version']"
)
LIMIT_KEYS = (
    "['ceiling_max_payload_bytes', 'default_max_payload_bytes', 'max_depth',"
    " 'max_identifier_chars', 'max_reason_chars', 'max_revision', 'max_values']"
)
UNKNOWN_PART = "unknown field or part, or no from-status"

# name -> (the edit, the exact refusal): each refusal names where the table is wrong.
UNSAFE_OR_MALFORMED: dict[str, tuple[Mutation, str]] = {
    "a transition back to ready": (
        _add_reset,
        "reset_execution: no transition may land in ready",
    ),
    "uncertain goes back to ready": (
        _set("transitions.complete_execution.to", "ready"),
        "complete_execution: no transition may land in ready",
    ),
    "decide says execute for completed": (
        _set("statuses.completed.action", "execute"),
        "decide must answer execute for ready and released and for no other status",
    ),
    "decide says deliver for ready": (
        _set("statuses.ready.action", "deliver"),
        "decide must answer execute for ready and released and for no other status",
    ),
    "completing without the attempt fence": (
        _set("transitions.complete_execution.fence", "none"),
        "complete_execution: leaving executing must be fenced by attemptId",
    ),
    "uncertain without the attempt fence": (
        _set("transitions.mark_execution_uncertain.fence", "deliveryId"),
        "mark_execution_uncertain: leaving executing must be fenced by attemptId",
    ),
    "finishing a delivery without its fence": (
        _set("transitions.complete_delivery.fence", "attemptId"),
        "complete_delivery: leaving delivering must be fenced by deliveryId",
    ),
    "a transition out of a terminal status": (
        _set("transitions.release_delivery.from", ["delivering", "delivered"]),
        "release_delivery: a terminal status may only step to itself, granting none",
    ),
    "a terminal status stepping to itself with a grant": (
        _set("transitions.prune_result.grants", "deliver"),
        "prune_result: a terminal status may only step to itself, granting none",
    ),
    "decide says reconcile for released": (
        _set("statuses.released.action", "reconcile-execution"),
        "decide must answer execute for ready and released and for no other status",
    ),
    "an uncertain execution is released": (
        _set("transitions.release_execution.from", ["executing", "uncertain"]),
        "release_execution: only executing may be released",
    ),
    "a completed execution is released": (
        _set("transitions.release_execution.from", ["completed"]),
        "release_execution: only executing may be released",
    ),
    "releasing without the attempt fence": (
        _set("transitions.release_execution.fence", "none"),
        "release_execution: leaving executing must be fenced by attemptId",
    ),
    "claim_delivery grants execute": (
        _set("transitions.claim_delivery.grants", "execute"),
        "claim_delivery: only ready or released -> executing may grant execute",
    ),
    "claim_execution also leaves from completed": (
        _set("transitions.claim_execution.from", ["ready", "completed"]),
        "claim_execution: only ready or released -> executing may grant execute",
    ),
    "records start executing": (
        _set("protocol.initial_status", "executing"),
        "records must start in ready at a revision of at least 1",
    ),
    "records start at revision 0": (
        _set("protocol.initial_revision", 0),
        "records must start in ready at a revision of at least 1",
    ),
    "a status missing": (
        _delete("statuses.uncertain"),
        "[statuses] must list every Status exactly once",
    ),
    "a status that does not exist": (
        _set("statuses.paused", _data()["statuses"]["ready"]),
        "statuses.paused: 'paused' is not a valid Status",
    ),
    "an unknown status": (
        _set("transitions.claim_execution.to", "paused"),
        "transitions.claim_execution: 'paused' is not a valid Status",
    ),
    "an unknown from-status": (
        _set("transitions.claim_execution.from", ["paused"]),
        "transitions.claim_execution: 'paused' is not a valid Status",
    ),
    "an unknown action": (
        _set("statuses.ready.action", "retry"),
        "statuses.ready: 'retry' is not a valid Action",
    ),
    "an unknown grant": (
        _set("transitions.claim_execution.grants", "retry"),
        "transitions.claim_execution: 'retry' is not a valid Action",
    ),
    "an unknown fence": (
        _set("transitions.claim_execution.fence", "lease"),
        "transitions.claim_execution: 'lease' is not a valid Fence",
    ),
    "an unknown field in sets": (
        _set("transitions.claim_execution.sets", ["execution.lease"]),
        f"transitions.claim_execution: {UNKNOWN_PART}",
    ),
    "an unknown part in clears": (
        _set("transitions.release_delivery.clears", ["binding"]),
        f"transitions.release_delivery: {UNKNOWN_PART}",
    ),
    "an unknown part in requires_null": (
        _set("transitions.claim_execution.requires_null", ["binding"]),
        f"transitions.claim_execution: {UNKNOWN_PART}",
    ),
    "no from-status": (
        _set("transitions.claim_delivery.from", []),
        f"transitions.claim_delivery: {UNKNOWN_PART}",
    ),
    "required and forbidden overlap": (
        _set("statuses.ready.required", ["execution"]),
        "statuses.ready: required and forbidden must be disjoint nullable parts",
    ),
    "an unknown required part": (
        _set("statuses.completed.required", ["result", "binding"]),
        "statuses.completed: required and forbidden must be disjoint nullable parts",
    ),
    "an unknown forbidden part": (
        _set("statuses.ready.forbidden", ["lease"]),
        "statuses.ready: required and forbidden must be disjoint nullable parts",
    ),
    "a terminal flag that is not a boolean": (
        _set("statuses.ready.terminal", "no"),
        "statuses.ready.terminal must be a boolean",
    ),
    "a status row that is not a table": (
        _set("statuses.ready", "execute"),
        "[statuses.ready] must be a table",
    ),
    "a status row with an unknown key": (
        _set("statuses.ready.lease_seconds", 30),
        f"statuses.ready must have exactly the keys {STATUS_KEYS}",
    ),
    "an unknown key": (
        _set("transitions.claim_execution.lease_seconds", 30),
        f"transitions.claim_execution must have exactly the keys {TRANSITION_KEYS}",
    ),
    "a composed step of an unknown part": (
        _set(f"{CHAIN}.composes", ["complete_execution", "deliver_twice"]),
        PARTS_OF_THE_TABLE,
    ),
    "a composed step of one part": (
        _set(f"{CHAIN}.composes", ["complete_execution"]),
        PARTS_OF_THE_TABLE,
    ),
    "a composed step that creates after its first part": (
        _set(f"{CHAIN}.composes", ["complete_execution", "create"]),
        PARTS_OF_THE_TABLE,
    ),
    "a composed step named like a transition": (
        _set("composed.claim_delivery", _data()["composed"]["complete_and_claim_delivery"]),
        "composed.claim_delivery: composes two or more parts of the table, create first",
    ),
    "a composed step whose parts do not chain": (
        _set(f"{CHAIN}.composes", ["complete_execution", "release_delivery"]),
        f"{CHAIN}: complete_execution does not land where release_delivery leaves",
    ),
    "a composed step with a fenced second part": (
        _both(
            _set(f"{CHAIN}.composes", ["claim_execution", "complete_execution"]),
            _set(f"{CHAIN}.from", ["ready"]),
        ),
        ONE_FENCE_ONE_GRANT,
    ),
    "a composed step that grants before its last part": (
        _both(
            _set(f"{CHAIN}.composes", ["claim_delivery", "complete_delivery"]),
            _set(f"{CHAIN}.from", ["completed"]),
        ),
        ONE_FENCE_ONE_GRANT,
    ),
    "a composed step with only its second part fenced": (
        _both(
            _set(f"{CHAIN}.composes", ["mark_execution_uncertain", "complete_execution"]),
            _set(f"{CHAIN}.from", ["executing"]),
        ),
        ONE_FENCE_ONE_GRANT,
    ),
    "a composed step granting in its middle part": (
        _both(
            _add_peek,
            _set(f"{CHAIN}.composes", ["complete_execution", "peek", "claim_delivery"]),
        ),
        ONE_FENCE_ONE_GRANT,
    ),
    "a composed step from an unknown status": (
        _set(f"{CHAIN}.from", ["paused"]),
        f"{CHAIN}: 'paused' is not a valid Status",
    ),
    "a composed step with a non-durable part": (
        _both(
            _set(f"{CHAIN}.composes", ["complete_delivery", "prune_result"]),
            _set(f"{CHAIN}.from", ["delivering"]),
        ),
        f"{CHAIN}: {ALL_DURABLE}",
    ),
    "a hand-back step that ends at its grant": (
        _set(f"{HAND_BACK}.composes", ["complete_execution", "claim_delivery"]),
        GRANTS_BEFORE_ITS_LAST,
    ),
    "a hand-back step that grants twice": (
        _both(
            _add_peek,
            _set(
                f"{HAND_BACK}.composes",
                ["complete_execution", "peek", "claim_delivery", "complete_delivery"],
            ),
        ),
        GRANTS_BEFORE_ITS_LAST,
    ),
    "a hand-back step that grants execute": (
        _set("composed.create_claimed.hand_back", True),
        "composed.create_claimed: a hand-back step grants deliver in one part before its last",
    ),
    "a step that goes on after its grant without being a hand-back step": (
        _set(f"{HAND_BACK}.hand_back", False),
        f"{HAND_BACK}: only its first part may be fenced, only its last grant",
    ),
    "a hand-back step that lands in a status that is not terminal": (
        _set(f"{HAND_BACK}.composes", ["complete_execution", "claim_delivery", "release_delivery"]),
        f"{HAND_BACK}: a hand-back step lands in a terminal status",
    ),
    "a hand-back step whose part after the grant is fenced by another claim": (
        _both(
            _add_stamp,
            _set(
                f"{HAND_BACK}.composes",
                ["complete_execution", "claim_delivery", "complete_delivery", "stamp"],
            ),
        ),
        f"{HAND_BACK}: a part after the grant is fenced only by the claim it made",
    ),
    "a hand-back flag that is not a boolean": (
        _set(f"{HAND_BACK}.hand_back", "yes"),
        f"{HAND_BACK}.hand_back must be a boolean",
    ),
    "a status that answers hand-back": (
        _set("statuses.completed.action", "hand-back"),
        "status completed: only a hand-back step grants hand-back",
    ),
    "a transition that grants hand-back": (
        _set("transitions.claim_delivery.grants", "hand-back"),
        "claim_delivery: only a hand-back step grants hand-back",
    ),
    "a creating step with a from-status": (
        _set("composed.create_claimed.from", ["ready"]),
        "composed.create_claimed: from is empty exactly when it creates, else the first's",
    ),
    "a composed step leaving where its first part does not": (
        _set(f"{CHAIN}.from", ["completed"]),
        f"{CHAIN}: from is empty exactly when it creates, else the first's",
    ),
    "a composed step without a from-status": (
        _set(f"{CHAIN}.from", []),
        f"{CHAIN}: from is empty exactly when it creates, else the first's",
    ),
    "a creating step whose first part does not leave the initial status": (
        _set("composed.create_claimed.composes", ["create", "complete_execution"]),
        "composed.create_claimed: its first part does not leave the initial status",
    ),
    "a composed row with an unknown key": (
        _set("composed.create_claimed.lease_seconds", 30),
        f"composed.create_claimed must have exactly the keys {COMPOSED_KEYS}",
    ),
    "a composed row that is not a table": (
        _set("composed.create_claimed", "create"),
        "[composed.create_claimed] must be a table",
    ),
    "a durable flag that is not a boolean": (
        _set("transitions.claim_execution.durable", "yes"),
        "transitions.claim_execution.durable must be a boolean",
    ),
    "a non-durable write that grants": (
        _both(
            _delete("composed.create_claimed"),
            _set("transitions.claim_execution.durable", False),
        ),
        "claim_execution: a non-durable write grants none and leaves no executable status",
    ),
    "a non-durable write from an executable status": (
        _both(
            _set("transitions.claim_execution.grants", "none"),
            _delete("composed.create_claimed"),
            _set("transitions.claim_execution.durable", False),
        ),
        "claim_execution: a non-durable write grants none and leaves no executable status",
    ),
    "a durable write leaving where a non-durable one lands": (
        _set("transitions.prune_result.durable", True),
        "prune_result: a durable write leaves a status that a non-durable write lands in",
    ),
    "an uncertain mark that is not durable": (
        _set("transitions.mark_execution_uncertain.durable", False),
        "complete_execution: a durable write leaves a status that a non-durable write lands in",
    ),
    "a missing key": (
        _delete("transitions.claim_execution.grants"),
        f"transitions.claim_execution must have exactly the keys {TRANSITION_KEYS}",
    ),
    "a transition row that is not a table": (
        _set("transitions.claim_execution", ["ready", "executing"]),
        "[transitions.claim_execution] must be a table",
    ),
    "a non-terminal status with action none": (
        _set("statuses.delivered.terminal", False),
        "status delivered is terminal iff its action is none",
    ),
    "a terminal status with an action": (
        _set("statuses.completed.terminal", True),
        "status completed is terminal iff its action is none",
    ),
    "an undocumented error code": (
        _delete("errors.FENCE_CONFLICT"),
        "[errors] must document every ErrorCode exactly once",
    ),
    "an error code that does not exist": (
        _set("errors.TIMEOUT", {"meaning": "m", "remedy": "r"}),
        "errors.TIMEOUT: 'TIMEOUT' is not a valid ErrorCode",
    ),
    "an error row that is not a table": (
        _set("errors.FENCE_CONFLICT", "lost"),
        "[errors.FENCE_CONFLICT] must be a table",
    ),
    "an error row without its remedy": (
        _delete("errors.FENCE_CONFLICT.remedy"),
        "errors.FENCE_CONFLICT must have exactly the keys ['meaning', 'remedy']",
    ),
    "an empty remedy": (
        _set("errors.FENCE_CONFLICT.remedy", ""),
        "errors.FENCE_CONFLICT.remedy must be a non-empty string",
    ),
    "a negative limit": (
        _set("limits.max_depth", -1),
        "limits.max_depth must be a non-negative integer",
    ),
    "a string limit": (
        _set("limits.max_values", "10000"),
        "limits.max_values must be a non-negative integer",
    ),
    "a boolean limit": (
        _set("limits.max_revision", True),
        "limits.max_revision must be a non-negative integer",
    ),
    "an unknown limit": (
        _set("limits.max_lease_seconds", 30),
        f"[limits] must have exactly the keys {LIMIT_KEYS}",
    ),
    "a listed item twice": (
        _set("transitions.complete_execution.from", ["executing"] * 2),
        "transitions.complete_execution.from lists an item twice",
    ),
    "a list that holds a number": (
        _set("promises.guarantees", ["at most once", 1]),
        "promises.guarantees must be a list of strings",
    ),
    "a string where a list belongs": (
        _set("promises.non_guarantees", "exactly once"),
        "promises.non_guarantees must be a list of strings",
    ),
    "an unknown promises key": (
        _set("promises.maybe", []),
        "[promises] must have exactly the keys ['guarantees', 'non_guarantees']",
    ),
    "a timestamps section without its format": (
        _delete("timestamps.format"),
        "[timestamps] must have exactly the keys ['format', 'ordering', 'ordering_why']",
    ),
    "an empty timestamp ordering": (
        _set("timestamps.ordering_why", ""),
        "timestamps.ordering_why must be a non-empty string",
    ),
    "a protocol section that is not a table": (
        _set("protocol", "v1"),
        "[protocol] must be a table",
    ),
    "a protocol section with an unknown key": (
        _set("protocol.name", "tec"),
        f"[protocol] must have exactly the keys {PROTOCOL_KEYS}",
    ),
    "a negative schema version": (
        _set("protocol.schema_version", -1),
        "protocol.schema_version must be a non-negative integer",
    ),
    "an empty format rationale": (
        _set("protocol.format_why", ""),
        "protocol.format_why must be a non-empty string",
    ),
    "an empty hand-back rule": (
        _set("protocol.hand_back", ""),
        "protocol.hand_back must be a non-empty string",
    ),
    "an unknown initial status": (
        _set("protocol.initial_status", "new"),
        "protocol: 'new' is not a valid Status",
    ),
    "an unknown section": (
        _set("leases", {}),
        f"the table must have exactly the keys {TOP_KEYS}",
    ),
    "a missing section": (
        _delete("errors"),
        f"the table must have exactly the keys {TOP_KEYS}",
    ),
}


@pytest.mark.parametrize("name", sorted(UNSAFE_OR_MALFORMED))
def test_loader_refuses_an_unsafe_or_malformed_table(name: str) -> None:
    data = _data()
    mutate, message = UNSAFE_OR_MALFORMED[name]
    mutate(data)
    with pytest.raises(SpecError) as refused:
        table_from_data(data)
    assert str(refused.value) == message


def test_spec_file_refuses_a_file_the_spec_does_not_have() -> None:
    with pytest.raises(SpecError) as refused:
        spec_file("lease.toml")
    assert str(refused.value) == (
        "spec file 'lease.toml' is neither in the package nor in a source checkout"
    )
    assert spec_file("record.schema.json").is_file()


def test_loader_refuses_text_that_is_not_toml() -> None:
    with pytest.raises(SpecError) as refused:
        load_table(TABLE_TEXT + "\n[statuses\n")
    assert str(refused.value).startswith("the transition table is not valid TOML: ")


def test_loader_accepts_the_unmutated_data() -> None:
    assert table_from_data(_data()) == TABLE


def _field_paths() -> list[tuple[str, object, str]]:
    """Every scalar or list field of the shipped table, with a bad value of its kind and
    the refusal that must name it."""
    data = _data()
    cases: list[tuple[str, object, str]] = []

    paths = [f"protocol.{key}" for key in data["protocol"]]
    paths += [f"limits.{key}" for key in data["limits"]]
    paths += [f"timestamps.{key}" for key in data["timestamps"]]
    paths += [f"promises.{key}" for key in data["promises"]]
    paths += [f"statuses.ready.{key}" for key in data["statuses"]["ready"]]
    paths += [
        f"transitions.claim_execution.{key}" for key in data["transitions"]["claim_execution"]
    ]
    paths += [f"errors.FENCE_CONFLICT.{key}" for key in data["errors"]["FENCE_CONFLICT"]]
    paths += [f"{CHAIN}.{key}" for key in data["composed"]["complete_and_claim_delivery"]]
    for path in paths:
        node: Any = data
        for key in path.split("."):
            node = node[key]
        if isinstance(node, bool):
            continue  # statuses.*.terminal: its own refusal is pinned above
        if isinstance(node, int):
            cases.append((path, -1, f"{path} must be a non-negative integer"))
        elif isinstance(node, str):
            cases.append((path, "", f"{path} must be a non-empty string"))
        else:
            cases.append((path, "x", f"{path} must be a list of strings"))
    return cases


@pytest.mark.parametrize(("path", "value", "message"), _field_paths(), ids=str)
def test_every_field_of_the_table_is_checked_by_name(
    path: str, value: object, message: str
) -> None:
    data = _data()
    _set(path, value)(data)
    with pytest.raises(SpecError) as refused:
        table_from_data(data)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    "path",
    [
        "statuses.ready.forbidden",
        "transitions.claim_execution.requires_null",
        "transitions.claim_execution.sets",
    ],
)
def test_a_list_may_name_every_part_or_field(path: str) -> None:
    """The loader checks that parts and fields are known (a subset), not fewer than all."""
    data = _data()
    everything = RECORD_FIELDS if path.endswith(".sets") else NULLABLE_PARTS
    _set(path, sorted(everything))(data)
    if path == "statuses.ready.forbidden":
        _set("statuses.ready.required", [])(data)
    loaded = table_from_data(data)
    *_, section, name, key = path.split(".")
    rule = loaded.statuses[Status(name)] if section == "statuses" else loaded.transitions[name]
    attribute = "requires_null" if key == "requires_null" else key
    assert set(getattr(rule, attribute)) == set(everything)


@pytest.mark.parametrize(
    ("path", "fence", "message"),
    [
        (
            "transitions.claim_delivery.fence",
            "deliveryId",
            "claim_delivery: its deliveryId fence needs delivery in completed",
        ),
        (
            "transitions.claim_execution.fence",
            "attemptId",
            "claim_execution: its attemptId fence needs execution in ready",
        ),
    ],
)
def test_a_fence_needs_its_owner_in_every_status_it_leaves(
    path: str, fence: str, message: str
) -> None:
    data = _data()
    _set(path, fence)(data)
    with pytest.raises(SpecError) as refused:
        table_from_data(data)
    assert str(refused.value) == message


def test_a_composed_step_takes_its_fence_and_null_requirements_from_its_first_part() -> None:
    data = _data()
    _set("transitions.complete_execution.requires_null", ["delivery"])(data)
    table = table_from_data(data)
    step = table.composed["complete_and_claim_delivery"]
    assert step.requires_null == frozenset({"delivery"})
    assert step.fence is table.transitions["complete_execution"].fence
    assert (step.target, step.grants) == (Status.DELIVERING, Action.DELIVER)
    created = table.composed["create_claimed"]
    assert (created.creates, created.sources, created.parts) == (True, (), ("claim_execution",))
    assert created.requires_null == frozenset()
    hand_back = table.composed["complete_and_deliver"]
    assert (hand_back.target, hand_back.grants, hand_back.fence) == (
        Status.DELIVERED,
        Action.HAND_BACK,
        Fence.ATTEMPT_ID,
    )
    assert hand_back.hand_back
    assert hand_back.durable
    assert not table.transitions["complete_delivery"].durable  # one of its parts is not
    assert not any(
        step.hand_back for name, step in table.composed.items() if name != "complete_and_deliver"
    )


def test_one_status_may_be_landed_in_durably_by_one_step_and_not_by_another() -> None:
    """delivered: durably by the hand-back step, not by complete_delivery; the host
    passes each write's durability with the write, so the table allows it."""
    data = _data()
    _set("transitions.complete_delivery.durable", True)(data)
    assert table_from_data(data).transitions["complete_delivery"].durable
    assert TABLE.composed["complete_and_deliver"].target is Status.DELIVERED
    assert TABLE.transitions["complete_delivery"].target is Status.DELIVERED
