"""The scratch space of a ``postgresql:`` URL (see
:mod:`tool_execution_checkpoint.testing.scratch`); needs the ``postgres`` extra."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from ...stores.postgres import PostgresNotAppliedError
from . import ScratchSpace

__all__ = ["PostgresScratch"]


class PostgresScratch(ScratchSpace):
    """Scratch stores for a ``postgresql:`` URL: one new table per store,
    ``SCHEMA.tec_check_RUN_N`` (with its index ``tec_check_RUN_N_status_updated``), each
    dropped at the end. The role needs CREATE on the schema; the URL's own table is never
    read or written."""

    def __init__(self, url: str, schema: str = "public") -> None:
        super().__init__(url)
        self.schema = schema

    def describe(self) -> str:
        """Which tables are made and dropped."""
        return (
            f"each check gets a new table {self.schema}.tec_check_{self.run}_N, dropped afterwards"
        )

    def location(self, number: int) -> tuple[str, dict[str, Any]]:
        """The URL, with the schema and the table of store ``number``."""
        return self.url, {"schema": self.schema, "table": f"tec_check_{self.run}_{number}"}

    def _remove(self) -> str:
        tables = [f"tec_check_{self.run}_{number}" for number in range(1, len(self.stores) + 1)]
        failure: str | None = None
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as connection:
                for table in tables:
                    name = sql.Identifier(self.schema, table)
                    connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        except psycopg.Error as error:  # its text may quote the URL: not kept as a context
            failure = f"{type(error).__name__}, SQLSTATE {error.sqlstate or 'none'}"
        if failure is not None:
            raise PostgresNotAppliedError(
                f"could not drop the {len(tables)} tables {self.schema}.tec_check_{self.run}_N "
                f"({failure}): drop them by hand"
            )
        return f"dropped the {len(tables)} tables {self.schema}.tec_check_{self.run}_N"
