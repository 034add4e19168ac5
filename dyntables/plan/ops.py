"""The operator tree a dynamic table's query compiles to: small frozen data.

Every node names its output columns with internal names that are unique in the whole
plan (``c0``, ``c1``, ...), so SQL rendered from any node can be nested without
ambiguity. Expressions are sqlglot trees whose column references are those names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace

from sqlglot import exp

from dyntables.sql.tokens import TableName

# table -> ordered (column, type) pairs, for qualification and Scan columns
Schema = Mapping[TableName, list[tuple[str, str]]]


@dataclass(frozen=True, eq=False)
class Node:
    @property
    def columns(self) -> tuple[str, ...]:
        raise NotImplementedError

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @property
    def label(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, eq=False)
class Scan(Node):
    table: TableName
    source_columns: tuple[str, ...]
    out: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.out

    @property
    def label(self) -> str:
        return f"Scan {self.table}"


@dataclass(frozen=True, eq=False)
class Constant(Node):
    """Rows that read no table (``VALUES``, a SELECT without FROM, a query over only
    those): the same at every snapshot, so its delta is always empty. ``sql`` is the
    query as Spark text, held as a string so that passes rewriting the plan's
    expressions (which name internal columns) leave it alone; ``out`` names its columns
    by position."""

    sql: str
    out: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.out


@dataclass(frozen=True, eq=False)
class Filter(Node):
    child: Node
    predicate: exp.Expr

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Project(Node):
    child: Node
    exprs: tuple[exp.Expr, ...]
    out: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.out

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)


JOIN_KINDS = ("inner", "left", "right", "full", "semi", "anti")


@dataclass(frozen=True, eq=False)
class Join(Node):
    kind: str
    left: Node
    right: Node
    left_keys: tuple[exp.Expr, ...]
    right_keys: tuple[exp.Expr, ...]
    residual: exp.Expr | None = None
    # whether a large side may be read within the other side's key range: not when the
    # keys' types order differently (a string beside a number) or cannot be told
    prunable: bool = True

    @property
    def columns(self) -> tuple[str, ...]:
        if self.kind in ("semi", "anti"):
            return self.left.columns
        return self.left.columns + self.right.columns

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @property
    def label(self) -> str:
        return f"Join {self.kind.upper()}"


# an aggregate with no running state (STDDEV, MEDIAN, ...): its ``arg`` is the whole call,
# recomputed for the groups a change touches
RECOMPUTED = "recomputed"
AGG_FUNCS = ("count_star", "count", "sum", "avg", "min", "max", "count_distinct", RECOMPUTED)


@dataclass(frozen=True, eq=False)
class AggCall:
    func: str
    arg: exp.Expr | None
    column: str


@dataclass(frozen=True, eq=False)
class Aggregate(Node):
    """GROUP BY keys (or a global aggregate when ``keys`` is empty)."""

    child: Node
    keys: tuple[exp.Expr, ...]
    key_columns: tuple[str, ...]
    aggs: tuple[AggCall, ...] = field(default_factory=tuple)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.key_columns + tuple(a.column for a in self.aggs)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def is_global(self) -> bool:
        return not self.keys


@dataclass(frozen=True, eq=False)
class UnionAll(Node):
    inputs: tuple[Node, ...]
    out: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.out

    @property
    def children(self) -> tuple[Node, ...]:
        return self.inputs


@dataclass(frozen=True, eq=False)
class Generate(Node):
    """Each row of ``child`` beside every row its generator ``call`` makes of it
    (``LATERAL VIEW explode(x) g AS v``, or ``explode(x) AS v`` in a SELECT list);
    ``out`` names the generated columns. ``outer``: a row that generates nothing is
    kept once, with NULLs (LATERAL VIEW OUTER)."""

    child: Node
    call: exp.Expr
    out: tuple[str, ...]
    outer: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns + self.out

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Window(Node):
    """Window functions over ``child``; ``partition_by`` is what every function shares."""

    child: Node
    partition_by: tuple[exp.Expr, ...]
    funcs: tuple[exp.Expr, ...]
    func_columns: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.child.columns + self.func_columns

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)


def replace_nodes(node: Node, swap: Mapping[int, Node]) -> Node:
    """``node`` with the nodes ``swap`` names (by ``id``) replaced, their ancestors
    rebuilt; a plan is frozen, so a later pass (one that needs Spark's types) makes a
    new one."""
    if id(node) in swap:
        return swap[id(node)]
    return _with_inputs(node, lambda n: replace_nodes(n, swap))


def map_nodes(node: Node, fn: Callable[[Node], Node]) -> Node:
    """``node`` rebuilt from the bottom up, ``fn`` applied to each operator once its
    inputs are rebuilt (unlike :func:`replace_nodes`, a replaced operator's inputs are
    replaced too)."""
    return fn(_with_inputs(node, lambda n: map_nodes(n, fn)))


def _with_inputs(node: Node, rebuild: Callable[[Node], Node]) -> Node:
    """``node`` over its inputs rebuilt by ``rebuild`` (itself where none changed)."""
    changes: dict[str, object] = {}
    for f in fields(node):
        value = getattr(node, f.name)
        if isinstance(value, Node):
            new = rebuild(value)
            if new is not value:
                changes[f.name] = new
        elif isinstance(value, tuple) and value and all(isinstance(v, Node) for v in value):
            rebuilt = tuple(rebuild(v) for v in value)
            if any(a is not b for a, b in zip(rebuilt, value, strict=True)):
                changes[f.name] = rebuilt
    return replace(node, **changes) if changes else node


def map_exprs(node: Node, fn: Callable[[exp.Expr], exp.Expr]) -> Node:
    """``node`` and everything below it with ``fn`` applied to each expression an
    operator holds (predicates, projections, keys, aggregate arguments, ...)."""
    return _mapped_exprs(node, fn, below=True)


def map_own_exprs(node: Node, fn: Callable[[exp.Expr], exp.Expr]) -> Node:
    """``node`` with ``fn`` applied to each expression it holds itself (its inputs as
    they are)."""
    return _mapped_exprs(node, fn, below=False)


def _mapped_exprs(node: Node, fn: Callable[[exp.Expr], exp.Expr], below: bool) -> Node:
    changes: dict[str, object] = {}
    for f in fields(node):
        value = getattr(node, f.name)
        if isinstance(value, Node):
            if below:
                changes[f.name] = map_exprs(value, fn)
        elif isinstance(value, exp.Expr):
            changes[f.name] = fn(value)
        elif isinstance(value, tuple) and value:
            if all(isinstance(v, Node) for v in value):
                if below:
                    changes[f.name] = tuple(map_exprs(v, fn) for v in value)
            elif all(isinstance(v, exp.Expr) for v in value):
                changes[f.name] = tuple(fn(v) for v in value)
            elif all(isinstance(v, AggCall) for v in value):
                changes[f.name] = tuple(
                    replace(a, arg=None if a.arg is None else fn(a.arg)) for a in value
                )
    return replace(node, **changes)


def walk_post_order(node: Node) -> list[Node]:
    out: list[Node] = []

    def visit(n: Node) -> None:
        for child in n.children:
            visit(child)
        out.append(n)

    visit(node)
    return out


def scans(node: Node) -> list[Scan]:
    return [n for n in walk_post_order(node) if isinstance(n, Scan)]


def col(name: str) -> exp.Column:
    return exp.column(name)
