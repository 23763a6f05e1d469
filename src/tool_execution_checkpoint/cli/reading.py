"""The commands that only read: ``spec`` (the transition table), ``inspect`` (is a record
valid, and what decide says), ``show`` (the whole record under a key) and ``list``
(records by status and age, on the store's clock), and the record's text and JSON forms
they print."""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from datetime import UTC, datetime
from typing import Any

from ..errors import CheckpointError
from ..operations import read_record, record_age_us
from ..progress import Progress
from ..records import Checkpoint
from ..rendering import render_markdown, render_mermaid
from ..stores.core import BrokenRecord, Listing, RecordSummary
from ..table import TABLE, Status
from .common import UNREADABLE, Exit, UsageError, open_store, read_input

__all__ = [
    "format_age",
    "inspect_record",
    "list_records",
    "record_json",
    "record_text",
    "show_record",
    "spec",
]


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        items = [_jsonable(item) for item in value]
        return sorted(items) if isinstance(value, frozenset | set) else items
    return value


def spec(form: str) -> str:
    """The transition table in ``form``: text, markdown, mermaid or json."""
    if form == "markdown":
        return render_markdown(TABLE)
    if form == "mermaid":
        return render_mermaid(TABLE)
    if form == "json":
        return json.dumps(_jsonable(TABLE), indent=2, ensure_ascii=False) + "\n"
    lines = ["statuses:"]
    lines += [f"  {r.status:<11} decide -> {r.action}" for r in TABLE.statuses.values()]
    lines.append("transitions:")
    for rule in TABLE.transitions.values():
        sources = ",".join(rule.sources)
        lines.append(
            f"  {rule.name:<25} {sources:<20} -> {rule.target:<11}"
            f" fence={rule.fence} grants={rule.grants}"
        )
    return "\n".join(lines) + "\n"


_SQLITE_HEADER = b"SQLite format 3\x00"


def inspect_record(
    source: str | None, url: str | None, key: str | None, location: dict[str, str]
) -> int:
    """``inspect``: read a record from the file ``source`` (stdin for None or ``-``) or
    from the store ``url`` under ``key``; print whether it is valid and what decide says;
    return the exit code."""
    if url is None and location:
        raise UsageError(f"--{next(iter(location))} needs --url")
    if url is not None:
        if key is None:
            raise UsageError("--url needs --key")
        store = open_store(url, **location)
        try:
            raw: Any = store.get(key)
        finally:
            store.close()
        if raw is None:
            print("no record under that key")
            return Exit.NO_RECORD
    else:
        data = read_input("inspect's file" if source not in (None, "-") else "stdin", source)
        if data.startswith(_SQLITE_HEADER):
            raise UsageError(
                f"{source} is a SQLite store, not a JSON record: list its records with "
                f"'list sqlite:{source}', read one with 'show sqlite:{source} KEY'"
            )
        try:
            raw = json.loads(data)
        except (ValueError, RecursionError):  # UnicodeDecodeError, nesting past the stack
            raw = UNREADABLE
        if raw is UNREADABLE:
            print("invalid: INVALID_CHECKPOINT: not JSON in UTF-8 (or nested too deep)")
            return Exit.INVALID_RECORD
    try:
        record = Checkpoint.from_dict(raw, max_payload_bytes=TABLE.limits.ceiling_max_payload_bytes)
    except CheckpointError as error:
        print(f"invalid: {error}")
        return Exit.INVALID_RECORD
    action = TABLE.statuses[record.status].action
    print(f"valid: status={record.status} revision={record.revision} decide={action}")
    print(f"call: namespace={record.binding.namespace} call_id={record.binding.call_id}")
    return Exit.OK


def format_age(seconds: float) -> str:
    """An age as its two largest units: ``45s``, ``12m 5s``, ``3h 20m``, ``2d 4h``."""
    whole = max(0, int(seconds))
    units = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
    parts: list[str] = []
    for name, size in units:
        count, whole = divmod(whole, size)
        if count or parts:
            parts.append(f"{count}{name}")
    return " ".join(parts[:2]) or "0s"


def record_json(key: str, record: Checkpoint, age_us: int, *, payload: bool) -> dict[str, Any]:
    """What show prints as JSON: the key, decide's action, the age (since the store last
    wrote it, on its clock), the payload's size and the persisted record, its payload
    left out unless ``payload``."""
    stored = record.to_dict()
    if stored["result"] is not None and not payload:
        del stored["result"]["payload"]
    return {
        "key": key,
        "decide": str(TABLE.statuses[record.status].action),
        "ageSeconds": age_us / 1e6,
        "payloadBytes": None if record.result is None else record.result.payload_bytes,
        "record": stored,
    }


def record_text(key: str, record: Checkpoint, age_us: int, *, payload: bool) -> str:
    """What show prints as text: one line per field."""
    binding = record.binding
    age = format_age(age_us / 1e6)
    lines = [
        ("key", key),
        ("status", f"{record.status} (decide: {TABLE.statuses[record.status].action})"),
        ("revision", str(record.revision)),
        ("namespace", binding.namespace),
        ("call id", binding.call_id),
        ("tool", f"{binding.tool_name}, revision {binding.tool_revision}"),
        ("input", binding.input_fingerprint),
        ("created", record.created_at),
        ("updated", f"{record.updated_at} (written {age} ago, on the store's clock)"),
    ]
    if (execution := record.execution) is not None:
        lines.append(("attempt id", execution.attempt_id))
        lines.append(("claimed", execution.claimed_at))
        if execution.uncertain is not None:
            lines.append(("uncertain", execution.uncertain.reason))
            lines.append(("since", execution.uncertain.at))
    if (result := record.result) is not None:
        lines.append(("completed", result.completed_at))
        if result.pruned_at is not None:
            lines.append(("pruned", f"{result.pruned_at} (the payload was dropped)"))
        else:
            lines.append(("payload", f"{result.payload_bytes:,} bytes of JSON"))
    if (delivery := record.delivery) is not None:
        lines.append(("delivery id", delivery.delivery_id))
        lines.append(("delivery claimed", delivery.claimed_at))
        if delivery.delivered_at is not None:
            lines.append(("delivered", delivery.delivered_at))
    text = "\n".join(f"{name + ':':<17} {value}" for name, value in lines) + "\n"
    if result is not None and result.pruned_at is None:
        if payload:
            text += result.payload_json + "\n"
        else:
            text += "(payload not shown: it may hold secrets; pass --payload to see it)\n"
    return text


def show_record(url: str, key: str, payload: bool, form: str, location: dict[str, str]) -> int:
    """``show``: print the record under ``key`` as text or JSON, its payload only with
    ``payload``; return the exit code."""
    store = open_store(url, **location)
    try:
        record = read_record(store, key)
        age = record_age_us(store, key, record, at=datetime.now(UTC).isoformat())
    finally:
        store.close()
    if form == "json":
        shown = record_json(key, record, age, payload=payload)
        print(json.dumps(shown, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(record_text(key, record, age, payload=payload))
    return Exit.OK


def list_records(
    url: str, statuses: list[str], older_than: float, form: str, location: dict[str, str]
) -> int:
    """``list``: print the records of ``statuses`` (all for none) last written at least
    ``older_than`` seconds ago on the store's clock, as a table or JSON, broken records
    included; return the exit code."""
    wanted = [Status(status) for status in statuses] or list(Status)
    store = open_store(url, **location)
    rows: list[RecordSummary | BrokenRecord] = []
    try:
        now = store.clock_us()  # ages are the store's: never the writers' clocks
        before = now - int(older_than * 1e6) if older_than > 0 else None
        listing = Listing(wanted, written_before_us=before, limit=500)
        with Progress("listing", unit="records") as progress:
            while page := store.list_records(listing):
                rows += page
                listing = listing.after(page[-1].key)
                progress.update(len(rows))
    finally:
        store.close()
    if form == "json":
        listed = [
            _jsonable(row) | {"broken": True}
            if isinstance(row, BrokenRecord)
            else _jsonable(row) | {"age_seconds": (now - row.written_us) / 1e6}
            for row in rows
        ]
        print(json.dumps(listed, indent=2, ensure_ascii=False))
    else:
        print(f"{'key':<69} {'status':<11} {'rev':>4} {'age':>7}  {'namespace':<16} call_id")
        for row in rows:
            if isinstance(row, BrokenRecord):  # its stored value is not a valid record
                print(f"{row.key:<69} {'broken':<11} {'-':>4} {'-':>7}  {row.reason}")
                continue
            age = format_age((now - row.written_us) / 1e6)
            print(
                f"{row.key:<69} {row.status:<11} {row.revision:>4} {age:>7}  "
                f"{row.namespace:<16} {row.call_id}"
            )
    return Exit.OK
