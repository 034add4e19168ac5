"""Statement parsing: our dynamic-table family, and everything else passed to Spark."""

from dyntables.sql.grammar import parse_statement
from dyntables.sql.script import is_complete, split_statements
from dyntables.sql.tokens import TableName

__all__ = ["TableName", "is_complete", "parse_statement", "split_statements"]
