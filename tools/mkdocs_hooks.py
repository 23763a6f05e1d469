"""MkDocs hooks for the documentation site (mkdocs.yml names this file under ``hooks``).

The docstrings cross-reference in Sphinx's roles (``:class:`~.runner.RunOutcome```), which
mkdocstrings renders as the role's name followed by the code span. This hook turns each into
the code span alone: the name as written, or its last part after a ``~``, as Sphinx shows it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["on_page_content", "unrole"]

_ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):<code>(~?)\.?([\w.]+)</code>")


def _shown(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"


def unrole(html: str) -> str:
    """``html`` with every Sphinx role before a code span dropped, the span kept."""
    return _ROLE.sub(_shown, html)


def on_page_content(html: str, **_: Any) -> str:
    """MkDocs' hook on a page's HTML: drop the Sphinx roles."""
    return unrole(html)
