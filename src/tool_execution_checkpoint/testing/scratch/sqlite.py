"""The scratch space of a ``sqlite:`` URL (see :mod:`tool_execution_checkpoint.testing.scratch`)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from ...stores.sqlite import SQLiteConfigurationError, SQLiteNotAppliedError, url_location
from . import ScratchSpace

__all__ = ["SQLiteScratch"]


class SQLiteScratch(ScratchSpace):
    """Scratch stores for a ``sqlite:`` URL: a new directory ``.tec-check-XXXXXXXX`` beside
    the URL's file, one new file per store in it (``check-N.db`` with its ``-wal`` and
    ``-shm`` files), and the directory deleted at the end. The URL's own file is never
    opened; its query (``busy_timeout``) is kept."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.parent = url_location(url)[0].parent
        self.query = urlsplit(url).query
        self.directory: Path | None = None

    def describe(self) -> str:
        """Where the new files go."""
        return (
            f"each check gets a new SQLite file in a new directory {self.parent}/"
            f".tec-check-XXXXXXXX, deleted afterwards"
        )

    def _prepare(self) -> bool:
        try:
            self.directory = Path(tempfile.mkdtemp(prefix=".tec-check-", dir=self.parent))
        except OSError as error:
            raise SQLiteConfigurationError(
                f"cannot create a directory in {self.parent}: {error.strerror}; "
                f"the directory must exist and be writable"
            ) from None
        return True

    def location(self, number: int) -> tuple[str, dict[str, Any]]:
        """The ``sqlite:`` URL of file ``check-N.db`` in the new directory."""
        if self.directory is None:
            raise SQLiteNotAppliedError("no scratch directory yet: make a store first")
        path = quote(str(self.directory / f"check-{number}.db"))
        return f"sqlite://{path}" + (f"?{self.query}" if self.query else ""), {}

    def _remove(self) -> str:
        if self.directory is None:
            return "nothing to remove"
        try:
            shutil.rmtree(self.directory)
        except OSError as error:
            raise SQLiteNotAppliedError(
                f"could not delete the directory {self.directory} ({error.strerror}): "
                f"delete it by hand"
            ) from None
        return f"deleted the directory {self.directory}"
