"""Scratch space: fresh, empty stores inside the target a store URL names, and their removal.

``tool-checkpoint check-store URL`` holds a store to the conformance suite without touching
the records already under the URL: every check gets a store in a space of its own, made for
it, and every space is removed at the end. What a space is belongs to the store (a new file
in a new directory, a new table, a new key prefix): each built-in store's
:class:`ScratchSpace` is in a module of this package (:mod:`.sqlite`, :mod:`.postgres`,
:mod:`.redis`), and a store registers its own with its URL schemes
(``register_store(..., scratch=...)``); :func:`scratch_space` finds it by the URL's scheme.
"""

from __future__ import annotations

import secrets
from typing import Any, cast

from ...stores.opening import _load, _refuse, _scheme_of, open_store

__all__ = ["ScratchSpace", "scratch_space"]


class ScratchSpace:
    """Fresh, empty stores inside one target, and their removal.

    A store's subclass says what a space is: :meth:`describe`, :meth:`location` (the URL
    and options that open store ``number``, so that worker processes can open it too),
    optionally :meth:`_prepare`, and :meth:`_remove`. Every name it makes carries
    :attr:`run`, 8 random hex digits new for each ScratchSpace, and :meth:`_remove` removes
    only names that carry it. Failures are the store's own StoreError classes; no message
    shows the URL.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.run = secrets.token_hex(4)
        self.stores: list[Any] = []
        self._started = False
        self._made_room = False

    def describe(self) -> str:
        """What each store gets and what is removed at the end."""
        raise NotImplementedError

    def location(self, number: int) -> tuple[str, dict[str, Any]]:
        """The URL and the options that open store ``number`` (counted from 1) with
        :func:`~tool_execution_checkpoint.stores.opening.open_store`."""
        raise NotImplementedError

    def _prepare(self) -> bool:
        """Make what the stores' spaces sit in, before the first store; return whether
        it made anything (then :meth:`remove` runs :meth:`_remove` even if no store
        opened). Nothing by default."""
        return False

    def _remove(self) -> str:
        """Remove every store's space; return what was removed."""
        raise NotImplementedError

    def make_store(self) -> Any:
        """A new, empty store in a space of its own, which :meth:`remove` closes."""
        if not self._started:
            self._started = True
            self._made_room = self._prepare()
        url, options = self.location(len(self.stores) + 1)
        store = open_store(url, **options)
        self.stores.append(store)
        return store

    def remove(self) -> str:
        """Close every store made, then remove their spaces; return what was removed.
        Raises the store's StoreError, naming what to remove by hand, when something
        could not be removed."""
        if not self.stores and not self._made_room:
            return "nothing to remove"
        for store in self.stores:
            store.close()
        return self._remove()


def scratch_space(url: str, **options: Any) -> ScratchSpace:
    """The :class:`ScratchSpace` of the store ``url`` names, by its scheme: fresh, empty
    stores inside the URL's target, each in a space of its own, removed by ``remove()``;
    the records already under the URL are never read or written.

    Args:
        url: The store's URL; never shown in a message.
        options: Where the spaces go, for a store that takes it (``schema`` on
            PostgreSQL; the default is ``public``).

    Raises:
        CheckpointError: INVALID_ARGUMENT, naming no part of the URL, for a URL whose
            scheme no store registered, whose store has no scratch space or does not take
            the URL, or a store whose optional extra is not installed.
    """
    entry = _scheme_of(url)
    if entry.scratch is None:
        raise _refuse("url", "names a store that has no scratch space (check it by a factory)")
    made = entry.scratch if callable(entry.scratch) else _load(entry.scratch, entry.extra)
    return cast(ScratchSpace, made(url, **options))
