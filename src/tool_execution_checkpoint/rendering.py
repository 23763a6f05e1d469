"""Render the transition table for people and for validators.

Everything in spec/ besides transitions.toml is generated from the table by this module:
``spec/README.md`` (the protocol's documentation), ``spec/record.schema.json`` (JSON
Schema 2020-12 of a persisted record) and the README's troubleshooting section. Run::

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

from .table import TABLE, TransitionTable
from .validation import TIMESTAMP_PATTERN

__all__ = [
    "render_errors_markdown",
    "render_markdown",
    "render_mermaid",
    "render_schema",
    "rendered_files",
]

_TROUBLESHOOTING_BEGIN = "<!-- troubleshooting: rendered from spec/transitions.toml -->"
_TROUBLESHOOTING_END = "<!-- end of troubleshooting -->"


def _code(items: tuple[str, ...] | frozenset[str] | list[str]) -> str:
    return ", ".join(f"`{item}`" for item in items) if items else "-"


def render_mermaid(table: TransitionTable = TABLE) -> str:
    """The state diagram as a Mermaid ``stateDiagram-v2``."""
    lines = ["stateDiagram-v2", f"    [*] --> {table.initial_status}: create_checkpoint"]
    for rule in table.transitions.values():
        lines.extend(f"    {source} --> {rule.target}: {rule.name}" for source in rule.sources)
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
    """spec/README.md: the protocol, rendered from the table."""
    limits = table.limits
    out = [
        f"# The tool-execution-checkpoint protocol, schema version {table.schema_version}\n",
        "<!-- Rendered from spec/transitions.toml by `make spec`. Do not edit by hand:"
        " a test fails when this file is stale. -->\n",
        "This is the protocol's documentation. Its source is the executable table in"
        " [`transitions.toml`](transitions.toml): the library loads that file at run time"
        " and derives every guard from it, the tests and proofs are driven by it, and this"
        " page and [`record.schema.json`](record.schema.json) are rendered from it.\n",
        f"{table.format_why}\n",
        "## The host's loop\n",
        "A host keeps one record per tool call in a store that offers create-if-absent, get"
        " and an atomic compare-and-swap (CAS) on the record's revision. For each tool call"
        " it:\n",
        "1. creates the record with `create_checkpoint` and stores it if absent;",
        "2. loads the stored record and calls `decide_checkpoint(record, binding)`;",
        "3. follows the action: for `execute`, calls `claim_execution`, CASes the next"
        " record from the expected revision, and runs the tool only if that CAS won;",
        "4. stores the exact result with `complete_execution` and a CAS (or, when the tool"
        " stopped before it had any effect, gives the claim up with `release_execution`);",
        "5. claims the delivery with `claim_delivery` and a CAS, sends the stored payload"
        " only if that CAS won, then records the outcome with `complete_delivery` (sent) or"
        " `release_delivery` (known not sent).\n",
        "After a crash or reconnect it starts again at step 2. A lost CAS, or a write whose"
        " outcome is unknown, always means: reload and decide. Nothing is ever done on a CAS"
        " that did not confirm success.\n",
        "### When the framework delivers\n",
        f"{table.hand_back}\n",
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
        " only after its store's CAS from `expected_revision` to `next` succeeded.\n",
        "| transition | from | requires null | to | fence | sets | clears | grants | meaning |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in table.transitions.values():
        out.append(
            f"| `{t.name}` | {_code(t.sources)} | {_code(sorted(t.requires_null))} |"
            f" `{t.target}` | `{t.fence}` |"
            f" {_code(t.sets)} | {_code(t.clears)} | `{t.grants}` | {t.meaning} |"
        )
    out += [
        "",
        "## State diagram\n",
        "```mermaid",
        render_mermaid(table).rstrip("\n"),
        "```\n",
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
        "Every refusal is a `CheckpointError` with one of these codes. Messages name the"
        " field and the limit, never a payload or identifier value.\n",
        render_errors_markdown(table),
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


def _readme_with_troubleshooting(readme: str, table: TransitionTable) -> str:
    begin = readme.find(_TROUBLESHOOTING_BEGIN)
    end = readme.find(_TROUBLESHOOTING_END)
    if begin < 0 or end < begin:
        raise ValueError("README.md lacks the troubleshooting markers")
    body = render_errors_markdown(table)
    return f"{readme[: begin + len(_TROUBLESHOOTING_BEGIN)]}\n\n{body}\n{readme[end:]}"


def rendered_files(root: Path, table: TransitionTable = TABLE) -> dict[Path, str]:
    """Every generated file under the repository ``root``, with the text it must have."""
    readme = root / "README.md"
    return {
        root / "spec" / "README.md": render_markdown(table),
        root / "spec" / "record.schema.json": json.dumps(
            render_schema(table), indent=2, ensure_ascii=False
        )
        + "\n",
        readme: _readme_with_troubleshooting(readme.read_text(encoding="utf-8"), table),
    }


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
    for path in stale:
        print(f"{'wrote' if args.write else 'stale'}: {path}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
