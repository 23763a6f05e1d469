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

from tool_execution_checkpoint import TABLE
from tool_execution_checkpoint.rendering import (
    render_markdown,
    render_mermaid,
    render_schema,
    rendered_files,
)
from tool_execution_checkpoint.table import SpecError, load_table, spec_file, table_from_data

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
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    command = [sys.executable, "-m", "tool_execution_checkpoint.rendering", "--check"]
    fresh = subprocess.run(
        [*command, "--root", str(tmp_path)], check=False, capture_output=True, text=True
    )
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    spec_readme = tmp_path / "spec" / "README.md"
    spec_readme.write_text(spec_readme.read_text(encoding="utf-8") + "\nhand edit\n")
    stale = subprocess.run(
        [*command, "--root", str(tmp_path)], check=False, capture_output=True, text=True
    )
    assert stale.returncode == 1
    assert "stale" in stale.stdout
    assert "README.md" in stale.stdout


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
    for code in TABLE.errors:
        assert f"### `{code}`" in text
    assert "```mermaid\nstateDiagram-v2\n" in text


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


def _delete(path: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        del node[leaf]

    return mutate


UNSAFE_OR_MALFORMED: dict[str, Mutation] = {
    "a transition back to ready": _add_reset,
    "uncertain goes back to ready": _set("transitions.complete_execution.to", "ready"),
    "decide says execute for completed": _set("statuses.completed.action", "execute"),
    "decide says deliver for ready": _set("statuses.ready.action", "deliver"),
    "completing without the attempt fence": _set("transitions.complete_execution.fence", "none"),
    "uncertain without the attempt fence": _set(
        "transitions.mark_execution_uncertain.fence", "deliveryId"
    ),
    "finishing a delivery without its fence": _set(
        "transitions.complete_delivery.fence", "attemptId"
    ),
    "a transition out of a terminal status": _set(
        "transitions.release_delivery.from", ["delivering", "delivered"]
    ),
    "claim_delivery grants execute": _set("transitions.claim_delivery.grants", "execute"),
    "records start executing": _set("protocol.initial_status", "executing"),
    "records start at revision 0": _set("protocol.initial_revision", 0),
    "a status missing": _delete("statuses.uncertain"),
    "an unknown status": _set("transitions.claim_execution.to", "paused"),
    "an unknown action": _set("statuses.ready.action", "retry"),
    "an unknown field in sets": _set("transitions.claim_execution.sets", ["execution.lease"]),
    "an unknown part in clears": _set("transitions.release_delivery.clears", ["binding"]),
    "required and forbidden overlap": _set("statuses.ready.required", ["execution"]),
    "an unknown key": _set("transitions.claim_execution.lease_seconds", 30),
    "a missing key": _delete("transitions.claim_execution.grants"),
    "a non-terminal status with action none": _set("statuses.delivered.terminal", False),
    "an undocumented error code": _delete("errors.FENCE_CONFLICT"),
    "a negative limit": _set("limits.max_depth", -1),
    "a string limit": _set("limits.max_values", "10000"),
    "no from-status": _set("transitions.claim_delivery.from", []),
    "a listed item twice": _set("transitions.complete_execution.from", ["executing"] * 2),
}


@pytest.mark.parametrize("name", sorted(UNSAFE_OR_MALFORMED))
def test_loader_refuses_an_unsafe_or_malformed_table(name: str) -> None:
    data = _data()
    UNSAFE_OR_MALFORMED[name](data)
    with pytest.raises(SpecError):
        table_from_data(data)


def test_loader_refuses_text_that_is_not_toml() -> None:
    with pytest.raises(SpecError, match="not valid TOML"):
        load_table(TABLE_TEXT + "\n[statuses\n")


def test_loader_accepts_the_unmutated_data() -> None:
    assert table_from_data(_data()) == TABLE
