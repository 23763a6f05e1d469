"""Render the transition table for people and for validators.

Everything derived from ``spec/transitions.toml`` is generated from the table by this
module: ``docs/spec.md`` (the protocol's documentation), ``docs/troubleshooting.md``
(every error code), ``spec/record.schema.json`` (JSON Schema 2020-12 of a persisted
record) and the state diagram ``docs/assets/states.svg`` (drawn by
:mod:`tool_execution_checkpoint.diagram`, which needs Graphviz's ``dot`` to redraw it).
Run::

    python -m tool_execution_checkpoint.rendering --write   # regenerate
    python -m tool_execution_checkpoint.rendering --check   # exit 1 when stale

from the repository's top directory (``make spec`` does the first).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .diagram import DiagramError, render_dot, render_svg, source_digest, svg_source_digest
from .table import CREATE, TABLE, TransitionTable
from .validation import TIMESTAMP_PATTERN

__all__ = [
    "render_errors_markdown",
    "render_markdown",
    "render_mermaid",
    "render_schema",
    "render_troubleshooting",
    "rendered_files",
    "stale_diagram",
]

DIAGRAM = Path("docs") / "assets" / "states.svg"
_RENDERED = (
    "<!-- Rendered from spec/transitions.toml by `make spec`. Do not edit by hand:"
    " a test fails when this file is stale. -->\n"
)


def _code(items: tuple[str, ...] | frozenset[str] | list[str]) -> str:
    return ", ".join(f"`{item}`" for item in items) if items else "-"


def render_mermaid(table: TransitionTable = TABLE) -> str:
    """The state diagram as a Mermaid ``stateDiagram-v2``."""
    lines = ["stateDiagram-v2", f"    [*] --> {table.initial_status}: create_checkpoint"]
    for rule in table.transitions.values():
        lines.extend(f"    {source} --> {rule.target}: {rule.name}" for source in rule.sources)
    for step in table.composed.values():
        sources = step.sources or ("[*]",)
        lines.extend(f"    {source} --> {step.target}: {step.name}" for source in sources)
    lines.extend(f"    {rule.status} --> [*]" for rule in table.statuses.values() if rule.terminal)
    return "\n".join(lines) + "\n"


def render_errors_markdown(table: TransitionTable = TABLE, heading: str = "###") -> str:
    """One section per error code: what it means and what to do."""
    parts = []
    for rule in table.errors.values():
        parts.append(
            f"{heading} `{rule.code}`\n\n**Means:** {rule.meaning}\n\n**Do:** {rule.remedy}\n"
        )
    return "\n".join(parts)


def render_markdown(table: TransitionTable = TABLE) -> str:
    """docs/spec.md: the protocol, rendered from the table."""
    limits = table.limits
    out = [
        f"# The protocol, schema version {table.schema_version}\n",
        _RENDERED,
        "This is the protocol's documentation. Its source is the executable table in"
        " `spec/transitions.toml`: the library loads that file at run time and derives"
        " every guard from it, the tests and proofs are driven by it, and this page, the"
        " state diagram, [troubleshooting](troubleshooting.md) and"
        " `spec/record.schema.json` are rendered from it.\n",
        f"{table.format_why}\n",
        "## The host's loop\n",
        "A host keeps one record per tool call in a store that offers create-if-absent, get"
        " and an atomic compare-and-swap (CAS) on the record's revision. For each tool call"
        " it:\n",
        "1. creates the record already claimed with `create_claimed` and stores it if"
        " absent, and runs the tool only if that create stored it; when a record is stored"
        " already, it loads it, calls `decide_checkpoint(record, binding)` and follows the"
        " action: for `execute` it claims with `claim_execution` and a CAS from the"
        " expected revision, and runs the tool only if that CAS won;",
        "2. stores the exact result and claims its delivery in one CAS with"
        " `complete_and_claim_delivery` (or, when the tool stopped before it had any"
        " effect, gives the claim up with `release_execution`; when it cannot tell what the"
        " tool did, marks it with `mark_execution_uncertain`);",
        "3. sends the stored payload only if that CAS won, then records the outcome with"
        " `complete_delivery` (sent) or `release_delivery` (known not sent). A record found"
        " `completed` (`deliver`) is claimed with `claim_delivery` and a CAS first.\n",
        "So a call makes three writes: two durable ones before anything is sent (the claim"
        " before the tool runs, the result with its delivery claim before it is"
        " delivered) and the delivered mark, which a store may acknowledge before it is"
        " flushed (see *durable* below). After a crash or reconnect it loads the record"
        " and decides. A lost CAS, or a write whose outcome is unknown, always means:"
        " reload and decide. Nothing is ever done on a CAS that did not confirm success.\n",
        "### When the framework delivers\n",
        f"{table.hand_back}\n",
        "So such a host makes two durable writes per call: `create_claimed` and, in step 2,"
        " `complete_and_deliver`; it hands the stored payload back only if that CAS won."
        " The composed steps below say what a crash after each write leaves.\n",
        "## State diagram\n",
        "Drawn from the table by `make spec` (Graphviz): a box per status, a double border"
        " for a terminal one; a solid arrow per transition, dotted when its write is not"
        " durable; a dashed arrow per composed step, red for a hand-back step. Open the"
        " picture for its full size.\n",
        "[![The statuses, transitions and composed steps of the table](assets/states.svg)]"
        "(assets/states.svg)\n",
        "## Statuses\n",
        "`decide_checkpoint` answers the status's action. *Must hold* and *must be null*"
        " list the record's nullable parts that the status requires or forbids.\n",
        "| status | decide answers | terminal | must hold | must be null | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for rule in table.statuses.values():
        out.append(
            f"| `{rule.status}` | `{rule.action}` | {'yes' if rule.terminal else 'no'} |"
            f" {_code(sorted(rule.required))} | {_code(sorted(rule.forbidden))} |"
            f" {rule.meaning} |"
        )
    out += [
        "",
        "## Transitions\n",
        "Each transition is a pure function returning `(action, expected_revision, next)`"
        " with `next.revision == expected_revision + 1`. It refuses a record whose status is"
        " not in *from*, or that holds a part listed under *requires null*"
        " (`INVALID_TRANSITION`), then a caller whose id does not match the"
        " *fence* (`FENCE_CONFLICT`). Besides `revision`, `status` and `updatedAt`, it writes"
        " the fields in *sets* and nulls those in *clears*. The host may do what it *grants*"
        " only after its store's CAS from `expected_revision` to `next` succeeded. A"
        " transition that is not *durable* grants nothing and may be acknowledged by the"
        " store before it is flushed: a store crash that loses it leaves the record in its"
        " source status, whose answer is safe. The host tells the store each write's"
        " durability with the write (`compare_and_swap(..., durable=False)`), not by the"
        " status it lands in: one status may be landed in durably by one step and not by"
        " another. No durable write leaves a status a non-durable write lands in, so"
        " nothing durable builds on a write a store crash can lose.\n",
        "| transition | from | requires null | to | fence | sets | clears | grants | durable"
        " | meaning |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in table.transitions.values():
        out.append(
            f"| `{t.name}` | {_code(t.sources)} | {_code(sorted(t.requires_null))} |"
            f" `{t.target}` | `{t.fence}` |"
            f" {_code(t.sets)} | {_code(t.clears)} | `{t.grants}` |"
            f" {'yes' if t.durable else 'no'} | {t.meaning} |"
        )
    out += [
        "",
        "## Composed steps\n",
        "A composed step is one durable write doing what its parts do, one after the other:"
        " one create-if-absent or one CAS instead of one per part, and no store ever holds"
        " the records in between. Its pure function returns `(action, expected_revision,"
        " next)` like a transition's, with `next` exactly the record its parts make, at"
        " `expected_revision + 1` (a created step's `expected_revision` is 0: no record)."
        " Its fence is its first part's, its grant its last part's. A *hand-back* step,"
        " for a host whose delivery is the hand-back, goes on after its part that grants"
        " `deliver` with parts that record the hand-back (fenced only by the claim that"
        " part made, possibly non-durable, landing in a terminal status), and grants"
        " `hand-back`: return the stored payload to the framework, never send it."
        " *Recovery* says which recovery answers change because the records in between are"
        " never stored, and why that is safe.\n",
        "| step | parts | from | to | fence | grants | hand-back | meaning | recovery |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in table.composed.values():
        parts = (CREATE, *c.parts) if c.creates else c.parts
        sources = _code(c.sources) if c.sources else "no record"
        out.append(
            f"| `{c.name}` | {_code(parts)} | {sources} | `{c.target}` | `{c.fence}` |"
            f" `{c.grants}` | {'yes' if c.hand_back else 'no'} | {c.meaning} | {c.recovery} |"
        )
    out += [
        "",
        "## Revisions\n",
        f"{table.initial_revision_why} Revisions never exceed {limits.max_revision:,}"
        " (a signed 64-bit integer).\n",
        "## Limits\n",
        "| limit | value | exact meaning |",
        "|---|---|---|",
        f"| payload size, default | {limits.default_max_payload_bytes:,} bytes | length of"
        " the payload's compact UTF-8 JSON encoding (separators `,` and `:`, no spaces,"
        " non-ASCII not escaped); exactly the limit is accepted, one byte more is refused |",
        f"| payload size, ceiling | {limits.ceiling_max_payload_bytes:,} bytes |"
        " `max_payload_bytes` may be any int in 1..ceiling; a record completed under a"
        " raised limit validates and decides when given the same limit |",
        f"| nesting depth | {limits.max_depth} | a scalar is depth 0, `[]` and `{{}}` are"
        " depth 1, `[[1]]` is depth 2 |",
        f"| values | {limits.max_values:,} | every value counts once, containers included;"
        " object keys do not count |",
        f"| identifier | 1 to {limits.max_identifier_chars} characters | binding fields,"
        " attempt id, delivery id: str, Unicode code points, no control characters (C0, DEL,"
        " C1), no lone surrogates |",
        f"| uncertain reason | 1 to {limits.max_reason_chars:,} characters | same character"
        " rules as an identifier |",
        "",
        "A payload is plain JSON only: `dict` with `str` keys, `list`, `str`, `int`, finite"
        " `float`, `bool`, `None` (exactly these types, not subclasses). Anything else is"
        " refused with `PAYLOAD_NOT_JSON`; a limit passed is `PAYLOAD_LIMIT_EXCEEDED`."
        " Checking stops as soon as a limit is passed.\n",
        "## Timestamps\n",
        f"Format: {table.timestamp_format}\n",
        f"Ordering: {table.timestamp_ordering} {table.timestamp_ordering_why}\n",
        "## Guarantees\n",
        *(f"- {item}" for item in table.guarantees),
        "",
        "## What the protocol does not guarantee\n",
        *(f"- {item}" for item in table.non_guarantees),
        "",
        "## Errors\n",
        "Every refusal is a `CheckpointError` with one of the codes of"
        " [troubleshooting](troubleshooting.md), which says what each means and what to"
        " do. Messages name the field and the limit, never a payload or identifier value.\n",
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [{"type": "null"}, schema]}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


def _at_path(path: str, leaf: dict[str, Any]) -> dict[str, Any]:
    """A schema constraining the camelCase path ``a.b`` of a record to ``leaf``."""
    schema = leaf
    for name in reversed(path.split(".")):
        schema = {"properties": {name: schema}}
    return schema


def render_schema(table: TransitionTable = TABLE) -> dict[str, Any]:
    """spec/record.schema.json: JSON Schema 2020-12 of a persisted record.

    Payload limits that JSON Schema cannot state (encoded size, depth, value count) are
    described in the payload's ``description`` and enforced by the library.
    """
    limits = table.limits
    text_pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
    identifier = {"$ref": "#/$defs/identifier"}
    timestamp = {"$ref": "#/$defs/timestamp"}
    conditions = []
    for rule in table.statuses.values():
        then: dict[str, Any] = {"allOf": []}
        then["allOf"] += [_at_path(p, {"not": {"type": "null"}}) for p in sorted(rule.required)]
        then["allOf"] += [_at_path(p, {"type": "null"}) for p in sorted(rule.forbidden)]
        conditions.append(
            {"if": {"properties": {"status": {"const": str(rule.status)}}}, "then": then}
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://tool-execution-checkpoint.invalid/spec/record.schema.json",
        "title": f"tool-execution-checkpoint record, schema version {table.schema_version}",
        "description": "Rendered from spec/transitions.toml. Do not edit by hand.",
        "$defs": {
            "identifier": {
                "type": "string",
                "minLength": 1,
                "maxLength": limits.max_identifier_chars,
                "pattern": text_pattern,
            },
            "timestamp": {
                "type": "string",
                "format": "date-time",
                "pattern": f"^{TIMESTAMP_PATTERN}$",
            },
        },
        **_object(
            {
                "schemaVersion": {"const": table.schema_version},
                "revision": {
                    "type": "integer",
                    "minimum": table.initial_revision,
                    "maximum": limits.max_revision,
                },
                "status": {"enum": [str(status) for status in table.statuses]},
                "binding": _object(
                    dict.fromkeys(
                        ("namespace", "callId", "toolName", "toolRevision", "inputFingerprint"),
                        identifier,
                    )
                ),
                "createdAt": timestamp,
                "updatedAt": timestamp,
                "execution": _nullable(
                    _object(
                        {
                            "attemptId": identifier,
                            "claimedAt": timestamp,
                            "uncertain": _nullable(
                                _object(
                                    {
                                        "reason": {
                                            "type": "string",
                                            "minLength": 1,
                                            "maxLength": limits.max_reason_chars,
                                            "pattern": text_pattern,
                                        },
                                        "at": timestamp,
                                    }
                                )
                            ),
                        }
                    )
                ),
                "result": _nullable(
                    _object(
                        {
                            "payload": {
                                "description": "The exact JSON payload to deliver. Also"
                                " limited, by the library, to max_payload_bytes of compact"
                                f" UTF-8 JSON (default {limits.default_max_payload_bytes},"
                                f" at most {limits.ceiling_max_payload_bytes}), a depth of"
                                f" {limits.max_depth} and {limits.max_values} values."
                            },
                            "completedAt": timestamp,
                            "prunedAt": _nullable(timestamp),
                        }
                    )
                ),
                "delivery": _nullable(
                    _object(
                        {
                            "deliveryId": identifier,
                            "claimedAt": timestamp,
                            "deliveredAt": _nullable(timestamp),
                        }
                    )
                ),
            }
        ),
        "allOf": conditions,
    }


def render_troubleshooting(table: TransitionTable = TABLE) -> str:
    """docs/troubleshooting.md: every error code, what it means and what to do."""
    return (
        "# Troubleshooting\n\n"
        + _RENDERED
        + "\nEvery refusal is a `CheckpointError` whose `.code` is one of these. Messages"
        " name the field and the limit, never the payload or identifier values.\n\n"
        + render_errors_markdown(table, heading="##")
    )


def rendered_files(root: Path, table: TransitionTable = TABLE) -> dict[Path, str]:
    """Every generated text file under the repository ``root``, with the text it must
    have (the state diagram is checked by its digest: :func:`stale_diagram`)."""
    return {
        root / "docs" / "spec.md": render_markdown(table),
        root / "docs" / "troubleshooting.md": render_troubleshooting(table),
        root / "spec" / "record.schema.json": json.dumps(
            render_schema(table), indent=2, ensure_ascii=False
        )
        + "\n",
    }


def stale_diagram(root: Path, table: TransitionTable = TABLE) -> bool:
    """Whether ``docs/assets/states.svg`` under ``root`` is missing or was drawn from
    other Graphviz text than the table's (:func:`~.diagram.render_dot`) gives now."""
    path = root / DIAGRAM
    if not path.exists():
        return True
    drawn = svg_source_digest(path.read_text(encoding="utf-8"))
    return drawn != source_digest(render_dot(table))


def main(argv: list[str] | None = None) -> int:
    """Write or check the generated files; return the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate the files")
    mode.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository top directory")
    args = parser.parse_args(argv)
    stale = []
    for path, text in rendered_files(args.root).items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            stale.append(path)
            if args.write:
                path.write_text(text, encoding="utf-8")
    if stale_diagram(args.root):
        stale.append(args.root / DIAGRAM)
        if args.write:
            try:
                picture = render_svg(render_dot())
            except DiagramError as error:
                print(f"cannot redraw {DIAGRAM}: {error}", file=sys.stderr)
                return 2
            (args.root / DIAGRAM).write_text(picture, encoding="utf-8")
    for path in stale:
        print(f"{'wrote' if args.write else 'stale'}: {path}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
