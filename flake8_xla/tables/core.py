"""Reading a rule table (a data file beside the rules) into typed rows: the checks a row's fields pass
and the lookups of rows by qualified name. Loaded by a cached run too: no ast, no analysis layer."""
from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional, Tuple, TypeVar

from .. import ruledata
from ..versions import Version, parse_version

Row = TypeVar("Row")


class TableError(ValueError):
    """A shipped table is malformed (a bug caught by the tests, never a user error)."""


def read_table(name: str) -> object:
    """The rule data file ``name`` as Python data, read afresh (each table caches what it builds from it)."""
    return ruledata.read_data(ruledata.data_path(name))


def strings(value) -> Tuple[str, ...]:
    """A field holding a list of strings (absent: none)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TableError(f"expected a list of strings, not {value!r}")
    return tuple(value)


def release(value) -> Optional[Version]:
    """A field naming a torch_xla release (absent or empty: none)."""
    return None if value in (None, "") else parse_version(str(value))


def check_fields(data: Mapping, row_type: type, row_id: str) -> None:
    """A row names only fields its type has: a misspelt field would be silently ignored."""
    unknown = set(data) - set(row_type._fields)
    if unknown:
        raise TableError(f"{row_id}: unknown fields {sorted(unknown)}")


def index_by_name(rows: Iterable[Row]) -> Dict[str, Row]:
    """The rows by each of their names; a name in two rows is refused (which would the use match?)."""
    index: Dict[str, Row] = {}
    for row in rows:
        for name in row.names:
            if name in index:
                raise TableError(f"{name} is in rows {index[name].id} and {row.id}")
            index[name] = row
    return index


def most_specific(index: Mapping[str, Row], qualname: str) -> Optional[Tuple[Row, str]]:
    """The row of ``qualname`` or of its longest dotted prefix in ``index``, with the name matched."""
    name = qualname
    while True:
        row = index.get(name)
        if row is not None:
            return row, name
        cut = name.rfind(".")
        if cut < 0:
            return None
        name = name[:cut]
