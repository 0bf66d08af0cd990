"""Statements of the hot path, compiled once and run on SQLite's own connection.

Running a statement through SQLAlchemy costs about 40 µs of Python (cache keys, execution
context, result wrappers); SQLite itself takes about 5 µs for the small statements of an append.
So the statements every append runs are written once with SQLAlchemy, compiled once for
SQLite here, and executed with the driver's cursor, applying the same type conversions
SQLAlchemy would (JSON in and out). On PostgreSQL they simply go through SQLAlchemy.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from bot import jsontext

_DIALECT = sqlite.dialect(paramstyle="qmark", json_serializer=jsontext.dumps)
Convert = Callable[[Any], Any]


def _conversions(processors: Iterable[Convert | None]) -> list[tuple[int, Convert]]:
    """(position, conversion) of the values that need one."""
    return [(index, p) for index, p in enumerate(processors) if p is not None]


def _bind_processor(kind: Any) -> Convert | None:
    # JSON straight to our writer: SQLAlchemy's own wraps it (for sentinels we never pass).
    if isinstance(kind, sa.JSON):
        return jsontext.dumps
    processor: Convert | None = kind.bind_processor(_DIALECT)
    return processor


def _result_processor(kind: Any) -> Convert | None:
    processor: Convert | None = kind.result_processor(_DIALECT, None)
    if processor is None or not isinstance(kind, sa.JSON):
        return processor
    decode = processor

    def tolerant(value: Any) -> Any:
        # SQLite gives a JSON column NUMERIC affinity: a bare number (`5`) comes back as
        # one, not as its JSON text.
        return value if isinstance(value, int | float) else decode(value)

    return tolerant


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
        self._keys = [b.key for b in binds]
        # Constants in the SQL (`IN (…)` lists), and the defaults of columns left out.
        self._constants = {b.key: b.value for b in binds if not b.required}
        self._defaults = dict(defaults or {})
        self._converts = _conversions(_bind_processor(b.type) for b in binds)
        returned = list(getattr(statement, "exported_columns", None) or [])
        self.columns = [column.key for column in returned]
        self._results = _conversions(_result_processor(c.type) for c in returned)

    def _row_in(self, values: Mapping[str, Any]) -> list[Any]:
        if self._constants:
            values = {**self._constants, **values}
        try:
            row = [values[key] for key in self._keys]
        except KeyError:  # columns left out get their defaults (the hot path gives them all)
            values = {**self._defaults, **values}
            row = [values[key] for key in self._keys]
        for index, convert in self._converts:
            # None stays SQL NULL (SQLAlchemy writes JSON's `null`; both read back as None).
            if row[index] is not None:
                row[index] = convert(row[index])
        return row

    def _row_out(self, row: Sequence[Any]) -> Sequence[Any]:
        if not self._results:
            return row
        converted = list(row)
        for index, convert in self._results:
            converted[index] = convert(converted[index])
        return converted

    def run(
        self, driver: sqlite3.Connection, values: dict[str, Any] | Sequence[Mapping[str, Any]]
    ) -> list[Sequence[Any]]:
        """Execute on SQLite's connection; a sequence of mappings is an executemany."""
        if isinstance(values, dict):  # not `Mapping`: an ABC check costs microseconds here
            rows = driver.execute(self.sql, self._row_in(values)).fetchall()
            return [self._row_out(row) for row in rows] if self.columns else []
        if len(values) == 1:  # one row: execute is cheaper than executemany
            driver.execute(self.sql, self._row_in(values[0]))
        else:
            driver.executemany(self.sql, [self._row_in(v) for v in values])
        return []

    def mapping(self, row: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(self.columns, row, strict=True))


@functools.cache
def insert(table: sa.Table) -> Prepared:
    """An insert of every column of `table` but an integer primary key (the database numbers
    the row); a column left out of the values gets its default, as through SQLAlchemy."""
    key = list(table.primary_key.columns)
    numbered = {key[0].key} if len(key) == 1 and isinstance(key[0].type, sa.Integer) else set()
    columns = [c for c in table.columns if c.key not in numbered]
    defaults = {c.key: c.default.arg if c.default is not None else None for c in columns}  # type: ignore[attr-defined]
    return Prepared(sa.insert(table), [c.key for c in columns], defaults)
