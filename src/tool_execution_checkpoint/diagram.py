"""The state diagram as a picture, drawn from the transition table.

:func:`render_dot` writes the table's statuses, transitions and composed steps as a
Graphviz graph (pure text, the same for the same table); :func:`render_svg` lays that text
out with Graphviz's ``dot`` (Debian's ``graphviz`` package) and records the SHA-256 of the
text it drew in the picture, so a test can tell a stale picture from the table without
Graphviz installed (:func:`svg_source_digest`). ``make spec`` writes the picture into the
documentation (``docs/assets/states.svg``).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess

from .table import TABLE, TransitionTable

__all__ = ["DiagramError", "render_dot", "render_svg", "source_digest", "svg_source_digest"]

_DIGEST = re.compile(r"<!-- drawn from the transition table, sha256:([0-9a-f]{64}) -->")
_START = "start"

_FONT = 'fontname="Helvetica,Arial,sans-serif"'


class DiagramError(RuntimeError):
    """Graphviz's ``dot`` is missing or failed, so the picture could not be drawn."""


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(name: str, width: int = 15) -> str:
    """A transition's name as a label, broken after an underscore into lines of about
    ``width`` characters (so the picture fits a page's column); the lines joined again
    give the name."""
    lines: list[str] = []
    line = ""
    for word in name.split("_"):
        joined = f"{line}_{word}" if line else word
        if len(joined) > width and line:
            lines.append(f"{line}_")
            line = word
        else:
            line = joined
    lines.append(line)
    return '"' + "\\n".join(lines) + '"'


def render_dot(table: TransitionTable = TABLE) -> str:
    """The table as a Graphviz digraph: a box per status (a double border when terminal),
    a solid arrow per transition (dotted when the write is not durable), a dashed arrow
    per composed step (bold when it is a hand-back step), each labelled with its name."""
    lines = [
        "digraph states {",
        f"  graph [rankdir=TB, nodesep=0.2, ranksep=0.35, {_FONT}];",
        f'  node [shape=box, style="rounded,filled", fillcolor="#eef1fb", color="#3f51b5",'
        f" {_FONT}, fontsize=15];",
        f'  edge [{_FONT}, fontsize=13, color="#37474f", fontcolor="#263238"];',
        f'  {_START} [shape=point, width=0.15, label=""];',
    ]
    for status in table.statuses.values():
        extra = ", peripheries=2" if status.terminal else ""
        name = _quote(str(status.status))
        lines.append(f"  {name} [label={name}{extra}];")
    first = _quote(str(table.initial_status))
    lines.append(f"  {_START} -> {first} [label={_label('create_checkpoint')}];")
    for rule in table.transitions.values():
        style = "" if rule.durable else ", style=dotted"
        for source in rule.sources:
            lines.append(
                f"  {_quote(str(source))} -> {_quote(str(rule.target))}"
                f" [label={_label(rule.name)}{style}];"
            )
    for step in table.composed.values():
        look = 'style="dashed,bold", color="#c62828"' if step.hand_back else "style=dashed"
        look += ', fontcolor="#c62828"' if step.hand_back else ""
        sources = [_START] if step.creates else [_quote(str(s)) for s in step.sources]
        lines.extend(
            f"  {source} -> {_quote(str(step.target))} [label={_label(step.name)}, {look}];"
            for source in sources
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def source_digest(dot: str) -> str:
    """The SHA-256 (hex) of a diagram's Graphviz text, as the picture records it."""
    return hashlib.sha256(dot.encode("utf-8")).hexdigest()


def svg_source_digest(svg: str) -> str | None:
    """The digest of the Graphviz text a picture says it was drawn from, or None."""
    found = _DIGEST.search(svg)
    return found.group(1) if found else None


def render_svg(dot: str) -> str:
    """Lay ``dot`` out with Graphviz into an SVG that records the text's digest.

    Raises :class:`DiagramError` when ``dot`` is not installed or refuses the text."""
    program = shutil.which("dot")
    if program is None:
        raise DiagramError("Graphviz's dot is not installed (Debian: apt-get install graphviz)")
    run = subprocess.run(
        [program, "-Tsvg"], input=dot, capture_output=True, text=True, check=False, timeout=60
    )
    if run.returncode != 0:
        raise DiagramError(f"dot failed with exit code {run.returncode}")
    svg = run.stdout
    mark = f"<!-- drawn from the transition table, sha256:{source_digest(dot)} -->\n"
    head, sep, rest = svg.partition("<svg")
    if not sep:
        raise DiagramError("dot wrote no SVG element")
    return f"{head}{mark}<svg{rest}"
