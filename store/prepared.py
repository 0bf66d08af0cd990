"""Statements of the hot path, compiled once and run on SQLite's own connection.

Running a statement through SQLAlchemy costs about 40 µs of Python (cache keys, execution
context, result wrappers); SQLite itself takes about 5 µs for the small statements of an append.
So the statements every append runs are written once with SQLAlchemy, compiled once for
SQLite here, and executed with the driver's cursor, applying the same type conversions
SQLAlchemy would (JSON in and out). On PostgreSQL they simply go through SQLAlchemy.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

_DIALECT = sqlite.dialect(paramstyle="qmark")
Convert = Callable[[Any], Any] | None


class Prepared:
    """One statement with named bind parameters (`sa.bindparam`) or, for an insert, the
    table's columns as parameters."""

    def __init__(
        self,
        statement: Any,
        columns: Sequence[str] | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self.statement = statement
        compiled = statement.compile(dialect=_DIALECT, column_keys=columns)
        self.sql = str(compiled)
        binds = [compiled.binds[name] for name in compiled.positiontup or []]
        fallback = dict(defaults or {})
        fallback.update((b.key, b.value) for b in binds if not b.required)  # constants in the SQL
        # (parameter, its conversion, whether it may be left out, its value then)
        self._binds: list[tuple[str, Convert, bool, Any]] = [
            (b.key, b.type.bind_processor(_DIALECT), b.key in fallback, fallback.get(b.key))
            for b in binds
        ]
        returned = list(getattr(statement, "exported_columns", None) or [])
        self.columns = [column.key for column in returned]
        self._results: list[Convert] = [
            column.type.result_processor(_DIALECT, None) for column in returned
        ]

    def _row_in(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        row = []
        for key, convert, optional, default in self._binds:
            value = values.get(key, default) if optional else values[key]
            row.append(value if convert is None or value is None else convert(value))
        return tuple(row)

    def _row_out(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(
            convert(value) if convert else value
            for value, convert in zip(row, self._results, strict=True)
        )

    def run(
        self, driver: sqlite3.Connection, values: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> list[tuple[Any, ...]]:
        """Execute on SQLite's connection; a sequence of mappings is an executemany."""
        if isinstance(values, Mapping):
            rows = driver.execute(self.sql, self._row_in(values)).fetchall()
            return [self._row_out(row) for row in rows] if self.columns else []
        driver.executemany(self.sql, [self._row_in(v) for v in values])
        return []

    def mapping(self, row: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(self.columns, row, strict=True))


def insert(table: sa.Table, *, skip: Sequence[str] = ()) -> Prepared:
    """An insert of every column of `table` but `skip` (an autoincrement id, say); a column
    left out of the values gets its default, as through SQLAlchemy."""
    columns = [c for c in table.columns if c.key not in skip]
    defaults = {c.key: c.default.arg if c.default is not None else None for c in columns}  # type: ignore[attr-defined]
    return Prepared(sa.insert(table), [c.key for c in columns], defaults)
