"""sqlglot AST -> operator tree (:mod:`dyntables.plan.ops`).

The query is first qualified by sqlglot (stars expanded, every column tied to a table
alias, USING turned into ON), then walked clause by clause: FROM/JOIN -> Scan/Join,
WHERE -> Filter and semi/anti joins, GROUP BY -> Aggregate, HAVING -> Filter, window
functions -> Window, SELECT -> Project, DISTINCT -> Aggregate over all columns.
Anything outside that grammar raises :class:`NotIncremental` with a stable code.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify

from dyntables.plan import grouping_sets, pivot, subquery, top_n, truth_subqueries
from dyntables.plan.annotate import annotated
from dyntables.plan.calls import (
    call_name,
    group_by_all_keys,
    is_aggregate_call,
    mean_as_avg,
    own_nodes,
    recomputable,
)
from dyntables.plan.generators import (
    GENERATORS,
    generates,
    mark_unnamed,
    modelled_generator,
    name_unnamed,
)
from dyntables.plan.having import as_where as having_as_where
from dyntables.plan.maps import read_map_values
from dyntables.plan.not_incremental import NotIncremental
from dyntables.plan.ops import (
    RECOMPUTED,
    AggCall,
    Aggregate,
    Constant,
    Filter,
    Generate,
    Join,
    Node,
    Project,
    Scan,
    Schema,
    UnionAll,
    Window,
    col,
    scans,
)
from dyntables.plan.prune import defining, drop_unread_columns, prune_scans
from dyntables.plan.query import (
    parse_query,
    scoped_names,
    semi_join_fields_as_dots,
    table_name,
)
from dyntables.plan.render import spark_sql
from dyntables.plan.time_windows import (
    TIME_WINDOW_COLUMN,
    own_time_windows,
    write_bucket_names_out,
)
from dyntables.plan.windows import (
    breaks_ties,
    holds_map,
    in_two_steps,
    inline_named_windows,
    runs_over_peers,
    total_order,
)
from dyntables.sql.tokens import TableName


@dataclass(frozen=True, eq=False)
class Plan:
    root: Node
    output_names: tuple[str, ...]
    # queries Spark must not prove empty (subquery.ScalarJoin.body of a correlated COUNT:
    # over an input Spark's optimizer empties, Spark answers NULL, not 0); the planner
    # asks Spark, which the pure builder cannot
    not_provably_empty: tuple[str, ...] = ()
    # the root's columns holding a MAP as its entries (map_entries): the table's column
    # is written as map_from_entries of it and matched by map_entries (refresh/apply.py)
    entries: frozenset[str] = frozenset()


_SUPPORTED_AGGS: dict[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}

Scope = dict[tuple[str, str], str]  # (alias, column) -> internal name


def build_plan(
    query_text: str,
    schema: Schema,
    qualify_name: Callable[[TableName], TableName],
    map_outputs: Collection[int] = (),
) -> Plan:
    """``map_outputs``: the positions of the query's columns Spark types as a MAP (the
    pure builder cannot type every expression); each must be carried as its entries, or
    the query is FULL."""
    tree = inline_named_windows(scoped_names(parse_query(query_text), qualify_name))
    semi_join_fields_as_dots(tree)
    tree = mark_unnamed(tree)
    _name_values_columns(tree)
    write_bucket_names_out(tree, {c.lower() for cols in schema.values() for c, _ in cols})
    pivot.mark_unpivot_names(tree)
    _refuse_unmodelled(tree)
    _refuse_case_twins(schema)
    sg_schema: dict[str, object] = {}
    for name, cols in schema.items():
        cat, db, tbl = name.parts
        catalog_schema = sg_schema.setdefault(cat, {})
        assert isinstance(catalog_schema, dict)
        catalog_schema.setdefault(db, {})[tbl] = {c: t for c, t in cols}
    default = qualify_name(TableName(("x",)))
    try:
        qualified = qualify(
            tree,
            schema=sg_schema,
            catalog=default.parts[0],
            db=default.parts[1],
            dialect="spark",
            quote_identifiers=False,
            validate_qualify_columns=True,
        )
    except OptimizeError as exc:
        raise NotIncremental("UNRESOLVED_QUERY", "query", str(exc).splitlines()[0]) from exc
    try:  # types tell which keys compare as the rules keep them (subquery.keys_differ)
        qualified = annotated(qualified, sg_schema)
    except Exception:  # noqa: BLE001 - untyped, every IN is recomputed: never wrong
        pass
    struct_star = next(
        (
            c
            for c in qualified.find_all(exp.Column, exp.Dot)
            if isinstance(c.this if isinstance(c, exp.Column) else c.expression, exp.Star)
        ),
        None,
    )
    if struct_star is not None:  # qualify expands every table's *: this one is a struct's
        raise NotIncremental(
            "STRUCT_STAR",
            struct_star.sql("spark"),
            "the fields a struct's * expands to are not modelled; recomputed FULL "
            "(name the fields to maintain it incrementally)",
        )
    unnamed = name_unnamed(qualified)
    if unnamed:
        raise NotIncremental(
            "GENERATOR",
            unnamed[0].upper(),
            "the names Spark gives the columns of this unnamed generator are not known "
            "before it runs (its argument's type is not, or a query reads them by name): "
            "name them (explode(x) AS v, or AS (a, b)); recomputed FULL",
        )
    builder = _Builder(schema, qualify_name)
    node, names = builder.query(qualified, {})
    if not scans(node):
        raise NotIncremental("NO_SOURCE", "query", "the query reads no table: it never changes")
    node, entries = read_map_values(node, schema, frozenset(map_outputs))
    for i in sorted(map_outputs):
        if node.columns[i] not in entries:
            raise NotIncremental(
                "MAP_COLUMN",
                "output",
                f"column {names[i]} is a MAP read below the query's last projection "
                "(taken apart or passed on twice), or one an aggregate or a window builds: Spark "
                "cannot group or compare it",
            )
    node = prune_scans(drop_unread_columns(node, schema), schema)
    return Plan(node, tuple(names), tuple(builder.not_provably_empty), entries)


def _without_constant_keys(keys: list[exp.Expr], after: Scope) -> list[exp.Expr]:
    """GROUP BY ALL's ``keys`` without those reading only an uncorrelated scalar
    subquery's value (joined above the aggregate, the same for every row): grouping by
    them splits no group, beside another key. Alone they make Spark group by a constant,
    which, unlike a global aggregate, has no row over no rows: kept (and unresolved)."""

    def constant(k: exp.Expr) -> bool:
        columns = list(k.find_all(exp.Column))
        return bool(columns) and all((c.table.lower(), c.name.lower()) in after for c in columns)

    kept = [k for k in keys if not constant(k)]
    return kept if kept else keys


def case_twins(columns: Iterable[str]) -> tuple[str, str] | None:
    """Two of ``columns`` told apart by case alone (``a`` and ``A``, possible under
    spark.sql.caseSensitive), or None. Dynamic tables resolve names whatever their case
    and would read one for the other."""
    seen: dict[str, str] = {}
    for column in columns:
        other = seen.setdefault(column.lower(), column)
        if other != column:
            return other, column
    return None


def _refuse_case_twins(schema: Schema) -> None:
    """CREATE refuses a source with case twins; one that gains a twin later is
    recomputed, where Spark tells them apart."""
    for name, cols in schema.items():
        twins = case_twins(column for column, _ in cols)
        if twins is not None:
            raise NotIncremental(
                "CASE_TWIN_COLUMNS",
                "Scan",
                f"source {name} has columns {twins[0]} and {twins[1]}, told apart by case "
                "alone; recomputed by Spark, which tells them apart",
            )


class _Builder:
    def __init__(self, schema: Schema, qualify_name: Callable[[TableName], TableName]) -> None:
        self.schema = {k: v for k, v in schema.items()}
        self.qualify_name = qualify_name
        self._ids = itertools.count()
        self.not_provably_empty: list[str] = []

    def fresh(self) -> str:
        return f"c{next(self._ids)}"

    def _schema_name(self, name: TableName) -> TableName:
        """The source as its catalog spells it. sqlglot lower-cases unquoted names (Spark
        resolves columns case-insensitively), but an Iceberg catalog keeps a table's case:
        ``FROM Orders`` reads the table Orders, which the qualified tree calls orders."""
        if name in self.schema:
            return name
        folded = tuple(p.lower() for p in name.parts)
        matches = [k for k in self.schema if tuple(p.lower() for p in k.parts) == folded]
        return matches[0] if len(matches) == 1 else name

    # -- queries ---------------------------------------------------------------------------
    def query(self, q: exp.Expr, ctes: dict[str, exp.Expr]) -> tuple[Node, list[str]]:
        if isinstance(q, exp.Query) and reads_nothing(q):
            names = list(q.named_selects)
            return Constant(spark_sql(q), tuple(self.fresh() for _ in names)), names
        with_ = q.args.get("with_") or q.args.get("with")
        if with_ is not None:
            ctes = dict(ctes)
            for cte in with_.expressions:
                ctes[cte.alias_or_name.lower()] = cte.this
        if isinstance(q, exp.Query) and (q.args.get("limit") or q.args.get("offset")):
            try:
                ranked = top_n.as_ranked(q)
            except top_n.Unsupported as exc:
                raise NotIncremental("LIMIT", "LIMIT", exc.detail) from None
            return self._select(ranked, ctes)
        if isinstance(q, exp.Union):
            return self._union(q, ctes)
        if isinstance(q, (exp.Intersect, exp.Except)):
            return self._intersect_except(q, ctes)
        if isinstance(q, exp.Subquery):
            return self.query(q.this, ctes)
        if not isinstance(q, exp.Select):
            raise NotIncremental("UNSUPPORTED_QUERY", type(q).__name__, q.sql("spark")[:80])
        return self._select(q, ctes)

    def _union(self, q: exp.Union, ctes: dict[str, exp.Expr]) -> tuple[Node, list[str]]:
        left, names = self.query(q.left, ctes)
        right, rnames = self.query(q.right, ctes)
        if len(names) != len(rnames):
            raise NotIncremental(
                "UNRESOLVED_QUERY", "UNION", "the two sides have different column counts"
            )
        out = tuple(self.fresh() for _ in names)
        node: Node = UnionAll((left, right), out)
        if q.args.get("distinct"):
            node = self._distinct(node)
        return node, list(names)

    def _intersect_except(
        self, q: exp.Intersect | exp.Except, ctes: dict[str, exp.Expr]
    ) -> tuple[Node, list[str]]:
        """INTERSECT / EXCEPT as a GROUP BY of every column over both sides united, each
        row marked with the side it comes from: a row is in the answer when its group has
        rows from the left and (INTERSECT) some or (EXCEPT) none from the right; with ALL,
        as many copies as the group has on both sides (INTERSECT ALL: the smaller count)
        or more on the left (EXCEPT ALL: the difference), made by a generator. The union
        widens the two sides' types as Spark's set operations do, and grouping treats
        NULLs as equal as they do; the aggregate keeps the counts, so a change touches
        only the rows' own groups."""
        operator = type(q).__name__.upper()
        left, names = self.query(q.left, ctes)
        right, rnames = self.query(q.right, ctes)
        if len(names) != len(rnames):
            raise NotIncremental(
                "UNRESOLVED_QUERY", operator, "the two sides have different column counts"
            )
        marked = []
        for side, node in enumerate((left, right)):
            marks = (exp.Literal.number(int(side == 0)), exp.Literal.number(int(side == 1)))
            exprs = tuple(col(c) for c in node.columns) + marks
            marked.append(Project(node, exprs, tuple(self.fresh() for _ in exprs)))
        both = UnionAll(tuple(marked), tuple(self.fresh() for _ in marked[0].out))
        *values, in_left, in_right = both.columns
        keys = tuple(col(c) for c in values)
        from_left = AggCall("sum", col(in_left), self.fresh())
        from_right = AggCall("sum", col(in_right), self.fresh())
        groups = Aggregate(both, keys, tuple(self.fresh() for _ in keys), (from_left, from_right))
        on_left, on_right = col(from_left.column), col(from_right.column)
        zero = exp.Literal.number(0)
        out = tuple(self.fresh() for _ in names)
        if q.args.get("distinct"):
            right_rows = exp.GT if isinstance(q, exp.Intersect) else exp.EQ
            kept: Node = Filter(
                groups,
                exp.and_(
                    exp.GT(this=on_left, expression=zero),
                    right_rows(this=on_right, expression=zero.copy()),
                ),
            )
        else:
            copies: exp.Expr = (
                exp.Least(this=on_left, expressions=[on_right])
                if isinstance(q, exp.Intersect)
                else exp.Sub(this=on_left, expression=on_right)
            )
            positive = Filter(groups, exp.GT(this=copies, expression=zero))
            each = exp.Explode(
                this=exp.GenerateSeries(start=exp.Literal.number(1), end=copies.copy())
            )
            kept = Generate(positive, each, (self.fresh(),))
        return Project(kept, tuple(col(c) for c in groups.key_columns), out), list(names)

    def _grouping_sets(
        self,
        select: exp.Select,
        ctes: dict[str, exp.Expr],
        sets: list[list[exp.Expr]],
        everything: list[exp.Expr],
    ) -> tuple[Node, list[str]]:
        """ROLLUP / CUBE / GROUPING SETS: one plain GROUP BY per set, united (see
        :mod:`.grouping_sets`); window functions and DISTINCT over the united rows."""
        if own_time_windows(select):
            # Spark computes the bucket once below all the sets, dropping the rows whose
            # time is NULL from every set, also those that do not group by the bucket
            raise NotIncremental("GROUPING_SETS", "GROUP BY", "window() in grouping sets")
        on_top = grouping_sets.over_rows(select, everything)
        if on_top is not None:
            return self._select(on_top, ctes)
        names = [e.alias_or_name for e in select.expressions]
        try:
            branches = [grouping_sets.branch(select, keys, everything) for keys in sets]
        except grouping_sets.Unsupported as exc:
            raise NotIncremental("GROUPING_SETS", "GROUP BY", exc.detail) from None
        nodes = tuple(self._select(b, ctes)[0] for b in branches)
        return UnionAll(nodes, tuple(self.fresh() for _ in names)), names

    def _distinct(self, node: Node) -> Node:
        keys = tuple(col(c) for c in node.columns)
        return Aggregate(node, keys, tuple(self.fresh() for _ in keys), ())

    def _select(self, select: exp.Select, ctes: dict[str, exp.Expr]) -> tuple[Node, list[str]]:
        source = pivot.pivoted_source(select)
        if source is not None:
            columns = self._columns_of(source, ctes)
            if any(p.args.get("unpivot") for p in source.args["pivots"]):
                return self._select(pivot.as_lateral_view(select, columns), ctes)
            return self._select(pivot.as_group_by(select, columns), ctes)
        if select.args.get("limit") or select.args.get("offset"):  # only query() ranks them
            raise NotIncremental("LIMIT", "LIMIT", "a LIMIT the compiler did not rank")
        for unsupported in ("pivots", "qualify", "connect", "prewhere"):
            if select.args.get(unsupported):
                raise NotIncremental(
                    "UNSUPPORTED_CLAUSE", unsupported.upper(), "clause has no delta rule yet"
                )
        try:
            over_groups = having_as_where(select)
        except subquery.Unsupported as exc:
            raise NotIncremental(exc.code, "HAVING", exc.detail) from None
        if over_groups is not None:
            return self._select(over_groups, ctes)
        group = select.args.get("group")
        if group is not None:
            try:
                expanded = grouping_sets.expand(group)
            except grouping_sets.Unsupported as exc:
                raise NotIncremental("GROUPING_SETS", "GROUP BY", exc.detail) from None
            if expanded is not None:
                return self._grouping_sets(select, ctes, *expanded)
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            raise NotIncremental("NO_SOURCE", "SELECT", "a query without FROM reads no table")
        node, scope = self.relation(from_.this, ctes)
        for join in select.args.get("joins") or []:
            node, scope = self._join(node, scope, join, ctes)
        for lateral in select.args.get("laterals") or []:
            node, scope = self._lateral_view(node, scope, lateral)
        node, scope, select = self._time_window(node, scope, select)
        node, scope, select, late = self._scalar_subqueries(node, scope, select, ctes)
        where = select.args.get("where")
        if where is not None:
            node = self._where(node, scope, where.this, ctes)
        exprs = list(select.expressions)
        names = [e.alias_or_name for e in exprs]
        having = select.args.get("having")
        group = select.args.get("group")
        has_agg = any(_aggregates(e) for e in exprs) or having is not None
        generators = [e for e in exprs if generates(e)]
        if generators and (group is not None or has_agg or any(e.find(exp.Window) for e in exprs)):
            raise NotIncremental(
                "GENERATOR",
                call_name(generators[0].this).upper(),
                "a generator beside aggregates or window functions in one SELECT; recomputed FULL",
            )
        if len(generators) > 1:
            raise NotIncremental("GENERATOR", "SELECT", "one generator per SELECT, as in Spark")
        if group is not None or has_agg:
            after = {k: c for k, (_, c) in late.items()}
            node, exprs, having_pred = self._aggregate(
                node, scope, select, exprs, group, having, after
            )
            for right, _ in late.values():  # one row each, joined to every group
                node = Join("inner", node, right, (), (), None)
            post_scope: Scope | None = None
            if having_pred is not None:
                node = Filter(node, having_pred)
        else:
            post_scope = scope
            node, exprs, names = self._select_list(node, scope, exprs)
        del post_scope
        node, exprs = self._windows(node, exprs)
        out = tuple(self.fresh() for _ in exprs)
        node = Project(node, tuple(exprs), out)
        if select.args.get("distinct"):
            if select.args["distinct"].args.get("on"):
                raise NotIncremental("DISTINCT_ON", "DISTINCT ON", "DISTINCT ON has no delta rule")
            node = self._distinct(node)
        return node, names

    def _select_list(
        self, node: Node, scope: Scope, items: list[exp.Expr]
    ) -> tuple[Node, list[exp.Expr], list[str]]:
        """The items of a SELECT that does not aggregate, over ``node``, and their names.
        A generator among them (``explode(x) AS v``, ``posexplode(x) AS (p, v)``) is a
        Generate below the projection, each column it makes an item of its own."""
        exprs: list[exp.Expr] = []
        names: list[str] = []
        for e in items:
            if generates(e):
                made = [c.name for c in e.expressions] if isinstance(e, exp.Aliases) else [e.alias]
                out = tuple(self.fresh() for _ in made)
                node = Generate(node, self.expr(e.this, scope), out)
                exprs += [col(c) for c in out]
                names += made
                continue
            exprs.append(self.expr(e.unalias() if isinstance(e, exp.Alias) else e, scope))
            names.append(e.alias_or_name)
        return node, exprs, names

    def _lateral_view(self, node: Node, scope: Scope, lateral: exp.Expr) -> tuple[Node, Scope]:
        """``LATERAL VIEW [OUTER] gen(...) g AS c1, c2``: each row beside the rows its
        generator makes (its columns named, as Spark's defaults are not modelled)."""
        alias = lateral.args.get("alias")
        if not isinstance(lateral, exp.Lateral) or not lateral.args.get("view"):
            raise NotIncremental(
                "UNSUPPORTED_CLAUSE", "LATERAL", "LATERAL (subquery) has no delta rule yet"
            )
        if alias is None or not alias.columns:
            raise NotIncremental(
                "GENERATOR",
                "LATERAL VIEW",
                "name the columns it generates (LATERAL VIEW gen(...) g AS c1, ...) to"
                " maintain it; recomputed FULL",
            )
        made = [c.name for c in alias.columns]
        out = tuple(self.fresh() for _ in made)
        generated = Generate(
            node, self.expr(lateral.this, scope), out, outer=bool(lateral.args.get("outer"))
        )
        table = alias.name.lower()
        return generated, {
            **scope,
            **{(table, c.lower()): o for c, o in zip(made, out, strict=True)},
        }

    # -- FROM ------------------------------------------------------------------------------
    def relation(self, source: exp.Expr, ctes: dict[str, exp.Expr]) -> tuple[Node, Scope]:
        if source.args.get("pivots"):  # _select rewrote the pivot of a lone FROM relation
            raise NotIncremental("PIVOT", "PIVOT", "of a FROM clause with joins; recomputed FULL")
        node, names = self._relation(source, ctes)
        alias = source.args.get("alias")
        renamed = [c.name for c in alias.columns] if alias is not None else []
        if renamed:  # FROM t AS x(a, b): the columns go by the alias's names
            if len(renamed) != len(names):
                raise NotIncremental(
                    "UNRESOLVED_QUERY", "alias", f"{len(renamed)} names for {len(names)} columns"
                )
            names = renamed
        table = source.alias_or_name.lower()
        return node, {(table, n.lower()): c for n, c in zip(names, node.columns, strict=True)}

    def _columns_of(self, source: exp.Expr, ctes: dict[str, exp.Expr]) -> list[str]:
        """The names of a FROM relation's columns, without building it."""
        alias = source.args.get("alias")
        if alias is not None and alias.columns:
            return [c.name for c in alias.columns]
        if isinstance(source, exp.Values):
            return _values_names(source)
        if isinstance(source, exp.Table):
            if not source.args.get("db") and source.name.lower() in ctes:
                body = ctes[source.name.lower()]
                return list(body.named_selects) if isinstance(body, exp.Query) else []
            name = self._schema_name(self.qualify_name(table_name(source)))
            return [c for c, _ in self.schema.get(name, [])]
        return list(source.this.named_selects) if isinstance(source, exp.Subquery) else []

    def _relation(self, source: exp.Expr, ctes: dict[str, exp.Expr]) -> tuple[Node, list[str]]:
        if isinstance(source, exp.Table):
            if not source.args.get("db") and source.name.lower() in ctes:
                return self.query(ctes[source.name.lower()], ctes)
            if source.args.get("version") is not None:
                raise NotIncremental(
                    "TIME_TRAVEL_SOURCE",
                    "Scan",
                    "a source read AS OF a fixed version never changes",
                )
            name = self._schema_name(self.qualify_name(table_name(source)))
            if name not in self.schema:
                raise NotIncremental(
                    "UNKNOWN_SOURCE", "Scan", f"{name} is not a known source table"
                )
            source_cols = tuple(c for c, _ in self.schema[name])
            out = tuple(self.fresh() for _ in source_cols)
            return Scan(name, source_cols, out), list(source_cols)
        if isinstance(source, exp.Subquery):
            return self.query(source.this, ctes)
        if isinstance(source, exp.Values) and reads_nothing(source):
            names = _values_names(source)
            rows = source.copy()
            rows.set("alias", None)  # relation() names the columns by the alias's
            return Constant(spark_sql(rows), tuple(self.fresh() for _ in names)), names
        if isinstance(source, exp.Lateral) and not source.args.get("view"):
            raise NotIncremental(
                "LATERAL_SUBQUERY",
                "LATERAL",
                "a LATERAL subquery has no delta rule; written as a join (its correlation "
                "in the ON clause) or as a correlated scalar subquery in the SELECT list, "
                "it is maintained",
            )
        raise NotIncremental("UNSUPPORTED_SOURCE", type(source).__name__, source.sql("spark")[:80])

    def _join(
        self, left: Node, lscope: Scope, join: exp.Join, ctes: dict[str, exp.Expr]
    ) -> tuple[Node, Scope]:
        right, rscope = self.relation(join.this, ctes)
        side = (join.side or "").upper()
        kind = (join.kind or "").upper()
        if join.args.get("using"):
            raise NotIncremental(
                "UNRESOLVED_QUERY", "JOIN", "USING should have been rewritten to ON"
            )
        if kind in ("SEMI", "ANTI"):
            jkind = kind.lower()
        elif side in ("LEFT", "RIGHT", "FULL"):
            jkind = side.lower()
        elif kind in ("", "INNER", "CROSS"):
            jkind = "inner"
        else:
            raise NotIncremental(
                "UNSUPPORTED_JOIN", f"{side} {kind} JOIN".strip(), "join type has no delta rule"
            )
        on = join.args.get("on")
        lkeys, rkeys, residual, pairs = self._split_condition(on, lscope, rscope)
        scope = {**lscope, **rscope} if jkind not in ("semi", "anti") else dict(lscope)
        differ = subquery.keys_differ(pairs, by_value=jkind != "inner")
        if differ is not None and jkind != "inner":
            raise NotIncremental("KEY_TYPES", f"{jkind.upper()} JOIN", differ)
        if jkind == "full" and not lkeys:
            raise NotIncremental(
                "OUTER_JOIN_NON_EQUI", "FULL JOIN", "a full join needs an equality condition"
            )
        if jkind != "inner" and residual is not None:
            residual, right = self._push_residual(jkind, residual, left, right)
        join_node = Join(
            jkind, left, right, tuple(lkeys), tuple(rkeys), residual, prunable=differ is None
        )
        return join_node, scope

    def _push_residual(
        self, kind: str, residual: exp.Expr, left: Node, right: Node
    ) -> tuple[exp.Expr | None, Node]:
        """A non-equi ON condition on the right side only is a filter of the right input;
        one over both sides stays on the join, whose rule then matches the rows of the
        keys a change touches again (rules._delta_kept_side)."""
        used = {c.name for c in residual.find_all(exp.Column)}
        if kind in ("left", "semi", "anti") and used <= set(right.columns):
            return None, Filter(right, residual)
        return residual, right

    def _split_condition(
        self, on: exp.Expr | None, lscope: Scope, rscope: Scope
    ) -> tuple[list[exp.Expr], list[exp.Expr], exp.Expr | None, list[tuple[exp.Expr, exp.Expr]]]:
        """Equality keys (rewritten to internal names), the rest, and the key pairs as
        the query wrote them (typed, for subquery.keys_differ)."""
        lkeys: list[exp.Expr] = []
        rkeys: list[exp.Expr] = []
        rest: list[exp.Expr] = []
        pairs: list[tuple[exp.Expr, exp.Expr]] = []
        for conj in subquery.conjuncts(on):
            if isinstance(conj, exp.EQ | exp.NullSafeEQ):
                a, b = conj.this, conj.expression
                if _within(b, lscope) and _within(a, rscope):
                    a, b = b, a
                keys = _key_pairs(conj, a, b) if _within(a, lscope) and _within(b, rscope) else None
                if keys is not None:
                    lkeys += [self.expr(x, lscope) for x, _ in keys]
                    rkeys += [self.expr(y, rscope) for _, y in keys]
                    pairs.append((a, b))
                    continue
            rest.append(self.expr(conj, {**lscope, **rscope}))
        residual = exp.and_(*rest) if rest else None
        return lkeys, rkeys, residual, pairs

    # -- WHERE -----------------------------------------------------------------------------
    def _where(self, node: Node, scope: Scope, cond: exp.Expr, ctes: dict[str, exp.Expr]) -> Node:
        plain: list[exp.Expr] = []
        subqueries: list[tuple[str, exp.Expr]] = []
        for conj in subquery.conjuncts(cond):
            negated = isinstance(conj, exp.Not)
            inner = conj.this if negated else conj
            if subquery.is_exists_subquery(inner):
                subqueries.append(("anti" if negated else "semi", inner))
            elif isinstance(inner, exp.In) and inner.args.get("query") is not None:
                subqueries.append(("not_in" if negated else "semi", inner))
            elif subquery.has_subquery(conj):
                raise NotIncremental(
                    "SUBQUERY_EXPRESSION", "WHERE", f"subquery in {conj.sql('spark')[:60]}"
                )
            else:
                plain.append(self.expr(conj, scope))
        if plain:
            node = Filter(node, exp.and_(*plain))
        for kind, sub in subqueries:
            if kind == "not_in":
                assert isinstance(sub, exp.In)
                node = self._not_in(node, scope, sub, ctes)
            else:
                node = self._semi(node, scope, kind, sub, ctes)
        return node

    def _not_in(self, node: Node, scope: Scope, sub: exp.In, ctes: dict[str, exp.Expr]) -> Node:
        """``x NOT IN (SELECT y ...)`` as two anti joins (see :mod:`.subquery`)."""
        if isinstance(sub.this, exp.Tuple):
            return self._not_in_tuple(node, scope, sub, ctes)
        values, query = self._in_checked(
            sub, scope, "NOT IN (subquery) that refers to the outer query", "NOT IN"
        )
        if query.args.get("limit") or query.args.get("offset"):  # null_killers drops the order
            raise NotIncremental("LIMIT", "NOT IN", "NOT IN (subquery with LIMIT)")
        (outer,) = values
        value = self.expr(outer, scope)
        right, _ = self.query(query, ctes)
        node = Join("anti", node, right, (value,), (col(right.columns[0]),), None)
        killers, _ = self.query(subquery.null_killers(query), ctes)
        is_null = exp.paren(exp.Is(this=value.copy(), expression=exp.null()))  # in `=`
        return Join("anti", node, killers, (is_null,), (col(killers.columns[0]),), None)

    def _not_in_tuple(
        self, node: Node, scope: Scope, sub: exp.In, ctes: dict[str, exp.Expr]
    ) -> Node:
        """``(a, b) NOT IN (SELECT x, y ...)``: a row stays while no subquery row is
        possibly equal to it, column by column equal or either side NULL (SQL's
        three-valued comparison of rows is then TRUE or unknown, and NOT IN unknown drops
        the row). Two anti joins: one on the equality of every column (no NULL involved,
        Iceberg and Spark key it), one with no key for the matches a NULL takes part in."""
        outer, query = self._in_checked(
            sub, scope, "NOT IN (subquery) that refers to the outer query", "NOT IN"
        )
        values = [self.expr(e, scope) for e in outer]
        right, _ = self.query(query, ctes)
        node = Join("anti", node, right, tuple(values), tuple(col(c) for c in right.columns), None)
        right, _ = self.query(query, ctes)
        either_null = [
            exp.or_(
                exp.Is(this=v.copy(), expression=exp.null()),
                exp.Is(this=col(c), expression=exp.null()),
            )
            for v, c in zip(values, right.columns, strict=True)
        ]
        possibly_equal = [
            exp.or_(exp.EQ(this=v.copy(), expression=col(c)), null.copy())
            for v, c, null in zip(values, right.columns, either_null, strict=True)
        ]
        residual = exp.and_(exp.or_(*either_null), *possibly_equal)
        return Join("anti", node, right, (), (), residual)

    def _semi(
        self, node: Node, scope: Scope, kind: str, sub: exp.Expr, ctes: dict[str, exp.Expr]
    ) -> Node:
        if isinstance(sub, exp.In):
            # (a, b) IN (SELECT x, y ...): in a WHERE, a semi join on a = x AND b = y
            outer, query = self._in_checked(
                sub, scope, "IN (subquery) that refers to the outer query"
            )
            right, names = self.query(query, ctes)
            if len(names) != len(outer):
                raise NotIncremental(
                    "UNRESOLVED_QUERY", "IN", "IN (subquery) must return one column per value"
                )
            return Join(
                kind,
                node,
                right,
                tuple(self.expr(e, scope) for e in outer),
                tuple(col(c) for c in right.columns[: len(outer)]),
                None,
            )
        select = sub.this
        # the rule reads the subquery's FROM relation and WHERE alone; any other EXISTS
        # was counted instead (_count_truth_subqueries)
        assert isinstance(sub, exp.Exists) and truth_subqueries.semi_joined(sub, _plain_item)
        from_ = select.args.get("from_") or select.args.get("from")
        right, rscope = self.relation(from_.this, ctes)
        lkeys: list[exp.Expr] = []
        rkeys: list[exp.Expr] = []
        local: list[exp.Expr] = []
        other: list[exp.Expr] = []  # correlations beyond equalities: the join's residual
        pairs: list[tuple[exp.Expr, exp.Expr]] = []
        where = select.args.get("where")
        for conj in subquery.conjuncts(where.this if where is not None else None):
            if _within(conj, rscope):
                local.append(self.expr(conj, rscope))
                continue
            if isinstance(conj, exp.EQ | exp.NullSafeEQ):
                a, b = conj.this, conj.expression
                if _within(b, rscope) and _within(a, scope):
                    a, b = b, a
                keys = _key_pairs(conj, b, a) if _within(a, rscope) and _within(b, scope) else None
                if keys is not None:
                    lkeys += [self.expr(x, scope) for x, _ in keys]
                    rkeys += [self.expr(y, rscope) for _, y in keys]
                    pairs.append((b, a))
                    continue
            if subquery.has_subquery(conj):
                raise NotIncremental(
                    "CORRELATED_NON_EQUI", "EXISTS", f"correlation {conj.sql('spark')[:60]}"
                )
            try:
                other.append(self.expr(conj, {**scope, **rscope}))
            except NotIncremental:
                raise NotIncremental(
                    "CORRELATED_NON_EQUI", "EXISTS", f"correlation {conj.sql('spark')[:60]}"
                ) from None
        differ = subquery.keys_differ(pairs, by_value=True)
        if differ is not None:
            raise NotIncremental("KEY_TYPES", "EXISTS", differ)
        if local:
            right = Filter(right, exp.and_(*local))
        residual = exp.and_(*other) if other else None
        return Join(kind, node, right, tuple(lkeys), tuple(rkeys), residual)

    # -- scalar subqueries ----------------------------------------------------------------
    def _scalar_subqueries(
        self, node: Node, scope: Scope, select: exp.Select, ctes: dict[str, exp.Expr]
    ) -> tuple[Node, Scope, exp.Select, dict[tuple[str, str], tuple[Node, str]]]:
        """Scalar subqueries as joins (see :mod:`.subquery`), their places in the
        expressions taking their values. Those of the WHERE clause, and of the select
        list of a SELECT that does not aggregate, are joined here, below it; an
        uncorrelated one in the select list or HAVING of an aggregating SELECT is joined
        above its aggregate (returned: its value's scope key -> the node and column)."""
        aggregating = (
            select.args.get("group") is not None
            or select.args.get("having") is not None
            or any(_aggregates(e) for e in select.expressions)
        )
        select = select.copy()
        self._count_truth_subqueries(select, scope, aggregating)
        where = select.args.get("where")
        below = list(subquery.scalar_subqueries(where)) if where is not None else []
        above: list[exp.Subquery] = []
        for part in [*select.expressions, select.args.get("having")]:
            for sq in subquery.scalar_subqueries(part) if part is not None else ():
                # one in an aggregate's argument is a value of each row, joined below it
                in_argument = _in_aggregate_call(sq)
                (above if aggregating and not in_argument else below).append(sq)
        late: dict[tuple[str, str], tuple[Node, str]] = {}
        outer_aliases = {a for a, _ in scope if a}
        joined_above = {id(sq) for sq in above}  # by identity: equal texts are equal trees
        for sq in [*below, *above]:
            body = subquery.first_by_order(sq.this)
            one_aggregate = (
                isinstance(body, exp.Select)
                and len(body.expressions) == 1
                and _aggregates(body.expressions[0])
            )
            try:
                joined = subquery.scalar_join(body, outer_aliases, one_aggregate, select)
            except subquery.Unsupported as exc:
                raise NotIncremental(exc.code, "scalar subquery", exc.detail) from None
            if id(sq) in joined_above and joined.outer_keys:
                raise NotIncremental(  # Spark refuses it as well
                    "SUBQUERY_EXPRESSION",
                    "scalar subquery",
                    "a correlated scalar subquery in the select list of an aggregating SELECT",
                )
            right, _ = self.query(joined.body, ctes)
            if joined.empty is not None and not truth_subqueries.counted(sq):
                self.not_provably_empty.append(spark_sql(_with_ctes(joined.body, ctes)))
            keys = len(joined.outer_keys)
            name = f"{subquery.SUBQUERY_ALIAS}_{self.fresh()}"
            if id(sq) in joined_above:
                late[(name, subquery.VALUE)] = (right, right.columns[0])
            elif keys:
                outer = [self.expr(k, scope) for k in joined.outer_keys]
                lkeys, rkeys = self._scalar_keys(joined, outer, right.columns[:keys])
                node = Join("left", node, right, lkeys, rkeys, None)
            else:
                node = Join("inner", node, right, (), (), None)
            if id(sq) not in joined_above:
                scope = {**scope, (name, subquery.VALUE): right.columns[keys]}
                if joined.empty is not None:
                    scope[(name, subquery.MARKER)] = right.columns[keys + 1]
                    for i in range(joined.typed):
                        scope[(name, f"{subquery.AGGREGATE}{i}")] = right.columns[keys + 2 + i]
            sq.replace(subquery.valued(name, joined.empty))
        return node, scope, select, late

    def _count_truth_subqueries(self, select: exp.Select, scope: Scope, aggregating: bool) -> None:
        """EXISTS and IN (subquery) outside the WHERE's top-level conjuncts (which
        ``_where`` joins) as counting scalar subqueries (:mod:`.truth_subqueries`), in
        place: in the WHERE, and in the select list of a SELECT that does not aggregate
        or in an aggregate's argument (a value of each row, joined below it)."""
        clauses: list[tuple[exp.Expr, list[exp.Expr], bool]] = []
        where = select.args.get("where")
        if where is not None:
            clauses.append((where.this, truth_subqueries.top_level(where.this, _plain_item), False))
        clauses += [(e, [], aggregating) for e in select.expressions]
        outer_aliases = {a for a, _ in scope if a}
        for root, handled, in_arguments_only in clauses:
            for node in truth_subqueries.of_clause(root, handled):
                if in_arguments_only and not _in_aggregate_call(node):
                    raise NotIncremental(
                        "SUBQUERY_EXPRESSION",
                        "IN" if isinstance(node, exp.In) else "EXISTS",
                        "a subquery in the select list of a GROUP BY outside an aggregate's "
                        "argument",
                    )
                node.replace(self._counted(node, root, scope, outer_aliases))

    def _counted(
        self, node: exp.Expr, root: exp.Expr, scope: Scope, outer_aliases: set[str]
    ) -> exp.Expr:
        """The counting subquery that replaces ``node``, an EXISTS or IN of ``root`` (a
        WHERE's condition or a select item); the IN checked as a semi join's is, since
        its count is grouped by the subquery's values just as a semi join keys them."""
        try:
            if isinstance(node, exp.Exists):
                return truth_subqueries.exists_count(node, _plain_item)
            assert isinstance(node, exp.In)
            self._in_checked(
                node,
                scope,
                "IN (subquery) that refers to the outer query, outside a WHERE's conjuncts",
            )
            return truth_subqueries.in_count(node, root, outer_aliases)
        except subquery.Unsupported as exc:
            what = "IN" if isinstance(node, exp.In) else "EXISTS"
            raise NotIncremental(exc.code, what, exc.detail) from None

    def _in_checked(
        self, node: exp.In, scope: Scope, correlated: str, operator: str = "IN"
    ) -> tuple[list[exp.Expr], exp.Expr]:
        """``node``'s values and query, or why it is not maintained: a subquery that
        refers to the outer query (``correlated`` says where), a value Spark may fold to
        NULL, values and columns that do not pair up, or pair up with types whose values
        do not meet one for one."""
        values, query = subquery.in_parts(node)
        if _correlated(query, scope):
            raise NotIncremental("CORRELATED_IN", operator, correlated)
        _refuse_null_folded(operator, values)
        pairs = subquery.in_pairs(values, query)
        if pairs is None:
            raise NotIncremental(
                "UNRESOLVED_QUERY",
                operator,
                f"{operator} (subquery) must return one column per value",
            )
        differ = subquery.keys_differ(pairs, by_value=True)
        if differ is not None:
            raise NotIncremental("KEY_TYPES", operator, differ)
        if _untyped_column(pairs, len(values)):
            raise NotIncremental(  # kept as a key, a column of no type cannot be stored
                "KEY_TYPES",
                operator,
                f"{operator} (SELECT NULL ...): cast the NULL to the value's type",
            )
        return values, query

    def _scalar_keys(
        self, joined: subquery.ScalarJoin, outer: list[exp.Expr], columns: tuple[str, ...]
    ) -> tuple[tuple[exp.Expr, ...], tuple[exp.Expr, ...]]:
        """The keys a scalar subquery's groups are joined on: ``outer``, the outer keys
        over the node they are joined to, and the group's ``columns``; compared as ``<=>``
        when the correlation may hold for a NULL."""
        if not joined.null_safe:
            return tuple(outer), tuple(col(c) for c in columns)
        lkeys: list[exp.Expr] = []
        rkeys: list[exp.Expr] = []
        for written, left, name in zip(joined.outer_keys, outer, columns, strict=True):
            left, right = left.copy(), col(name)
            left.type = right.type = written.type
            pairs = subquery.null_safe_keys(left, right)
            if pairs is None:
                raise NotIncremental(
                    "KEY_TYPES",
                    "scalar subquery",
                    f"cannot tell the type of {written.sql('spark')[:60]}, which the "
                    "subquery is correlated with; recomputed",
                )
            lkeys += [a for a, _ in pairs]
            rkeys += [b for _, b in pairs]
        return tuple(lkeys), tuple(rkeys)

    # -- time buckets --------------------------------------------------------------------
    def _time_window(
        self, node: Node, scope: Scope, select: exp.Select
    ) -> tuple[Node, Scope, exp.Select]:
        """Spark's ``window(ts, '1 hour')`` computed once, below the SELECT that uses it.

        Spark resolves the call only in a single-input operator (a projection, filter or
        aggregate), where it also drops the rows whose time is NULL, and refuses it in a
        join condition, which is where the delta rules put group and partition keys
        (the groups whose MIN/MAX is recomputed, the window partitions re-ranked). So the
        bucket becomes a column of a projection over the FROM clause, after a filter
        that drops NULL times as Spark does, and the SELECT refers to that column.

        A sliding window (``window(ts, '1 hour', '10 minutes')``) puts a row in several
        windows: Spark's projection expands each row into one per window, as a generator
        does, a function of that row alone, so the projection's rule still holds."""
        calls = own_time_windows(select)
        if not calls:
            return node, scope, select
        for call in calls:
            name = call.name.lower()
            if name != "window":
                raise NotIncremental(
                    "TIME_WINDOW",
                    name,
                    f"{name}() has no delta rule (a session's bounds depend on the rows "
                    "around it); recomputed FULL",
                )
            args = call.expressions
            if len(args) < 2 or not all(
                isinstance(a, exp.Literal) and a.is_string for a in args[1:]
            ):
                raise NotIncremental("TIME_WINDOW", "window", "window() with non-literal durations")
        if len({c.sql("spark") for c in calls}) > 1:
            raise NotIncremental(
                "TIME_WINDOW", "window", "several different window() calls in one SELECT"
            )
        call = calls[0]
        time = self.expr(call.expressions[0], scope)
        bucket = exp.Anonymous(
            this="window", expressions=[time, *(a.copy() for a in call.expressions[1:])]
        )
        node = Filter(node, exp.Not(this=exp.Is(this=time.copy(), expression=exp.Null())))
        # only the columns the SELECT (or a subquery correlated with it) names pass, so
        # that the scans below still read only what the query uses
        named = {(c.table.lower(), c.name.lower()) for c in select.find_all(exp.Column)}
        renamed = {v: self.fresh() for k, v in scope.items() if k in named}
        bucket_col = self.fresh()
        node = Project(node, (*(col(c) for c in renamed), bucket), (*renamed.values(), bucket_col))
        scope = {k: renamed[v] for k, v in scope.items() if v in renamed}
        scope[("", TIME_WINDOW_COLUMN)] = bucket_col
        select = select.copy()
        for n in own_time_windows(select):
            n.replace(exp.column(TIME_WINDOW_COLUMN))
        return node, scope, select

    # -- GROUP BY / aggregates ---------------------------------------------------------------
    def _aggregate(
        self,
        node: Node,
        scope: Scope,
        select: exp.Select,
        exprs: list[exp.Expr],
        group: exp.Group | None,
        having: exp.Having | None,
        after: Scope,
    ) -> tuple[Node, list[exp.Expr], exp.Expr | None]:
        """``after``: columns joined above the aggregate (an uncorrelated scalar
        subquery's value, the same for every group)."""
        group_exprs: list[exp.Expr] = []
        if group is not None:  # grouping sets were split into plain GROUP BYs before
            # a key's parentheses are no part of it: GROUP BY (a - b) groups the item
            # a - b (its columns were taken for neither grouped nor aggregated: FULL)
            group_exprs = [g.unnest() for g in group.expressions]
            if group.args.get("all"):
                # an item with an aggregate inside a window (RANK() OVER (ORDER BY
                # SUM(x))) is no key; one with a window over no aggregate is refused
                group_exprs = group_by_all_keys(exprs)
                if any(e.find(exp.Window) for e in group_exprs):
                    raise NotIncremental(
                        "GROUP_BY_ALL",
                        "GROUP BY ALL",
                        "GROUP BY ALL with a window function over no aggregate",
                    )
                group_exprs = _without_constant_keys(group_exprs, after)
        keys = tuple(self.expr(g, scope) for g in group_exprs)
        key_cols = tuple(self.fresh() for _ in keys)
        aggs: list[AggCall] = []
        by_sql: dict[str, str] = {}

        def over_agg(n: exp.Expr) -> exp.Expr | None:
            if isinstance(n, exp.Window):
                # the window function itself runs after aggregation; its arguments,
                # PARTITION BY and ORDER BY are expressions over the aggregate's output
                w = n.copy()
                func = w.this
                for child in list(func.iter_expressions()):
                    child.replace(rewrite_tree(child, over_agg))
                for key in ("partition_by", "order"):
                    value = w.args.get(key)
                    if isinstance(value, list):
                        w.set(key, [rewrite_tree(v, over_agg) for v in value])
                    elif value is not None:
                        w.set(key, rewrite_tree(value, over_agg))
                return w
            for g, kc in zip(group_exprs, key_cols, strict=True):
                if n == g:
                    return col(kc)
            n = mean_as_avg(n)
            call: AggCall | None = None
            if recomputable(n):
                # no running state: the call as written, recomputed for touched groups
                call = AggCall(RECOMPUTED, self.expr(n, scope), self.fresh())
            elif is_aggregate_call(n) and not isinstance(n, exp.AggFunc):
                name = n.name if isinstance(n, exp.Anonymous) else "any"
                raise NotIncremental(
                    "AGGREGATE_FUNCTION", name.upper(), f"{name.upper()} has no delta rule yet"
                )
            elif isinstance(n, exp.Filter) and isinstance(n.this, exp.AggFunc):
                n = _filter_into_argument(n)
            if call is None and isinstance(n, exp.AggFunc):
                call = self._agg_call(n, scope)
            if call is not None:
                key = f"{call.func}:{call.arg.sql('spark') if call.arg is not None else ''}"
                if key not in by_sql:
                    by_sql[key] = call.column
                    aggs.append(call)
                return col(by_sql[key])
            if isinstance(n, exp.Column) and (n.table.lower(), n.name.lower()) in after:
                return col(after[(n.table.lower(), n.name.lower())])
            if isinstance(n, exp.Column):
                raise NotIncremental(
                    "UNRESOLVED_QUERY",
                    "GROUP BY",
                    f"column {n.sql('spark')} is neither grouped nor aggregated",
                )
            return None

        def rewrite(e: exp.Expr) -> exp.Expr:
            return rewrite_tree(e, over_agg)

        out_exprs = [rewrite(e.unalias() if isinstance(e, exp.Alias) else e) for e in exprs]
        having_pred = rewrite(having.this) if having is not None else None
        return Aggregate(node, keys, key_cols, tuple(aggs)), out_exprs, having_pred

    def _agg_call(self, n: exp.AggFunc, scope: Scope) -> AggCall:
        if isinstance(n, exp.CountIf) and {k for k, v in n.args.items() if v} == {"this"}:
            # COUNT_IF(p) counts the rows where p is true: COUNT(CASE WHEN p THEN 1 END)
            n = exp.Count(this=exp.case().when(n.this.copy(), exp.Literal.number(1)))
        func = _SUPPORTED_AGGS.get(type(n))
        if func is None:
            raise NotIncremental(
                "AGGREGATE_FUNCTION",
                n.sql_name().upper(),
                f"{n.sql_name().upper()} has no delta rule yet",
            )
        arg = n.this
        if isinstance(arg, exp.Distinct) and func in ("min", "max") and len(arg.expressions) == 1:
            arg = arg.expressions[0]  # the extreme of the distinct values is the extreme
        if isinstance(arg, exp.Distinct):
            if func == "count" and len(arg.expressions) == 1:
                return AggCall("count_distinct", self.expr(arg.expressions[0], scope), self.fresh())
            # SUM/AVG(DISTINCT x), COUNT(DISTINCT a, b): functions of the group's values
            # with no running state (a delete may or may not remove a distinct value)
            return AggCall(RECOMPUTED, self.expr(n, scope), self.fresh())
        if func == "count" and (arg is None or isinstance(arg, exp.Star)):
            return AggCall("count_star", None, self.fresh())
        if arg is None or n.args.get("expressions"):
            raise NotIncremental("AGGREGATE_FUNCTION", n.sql_name().upper(), "unexpected arguments")
        return AggCall(func, self.expr(arg, scope), self.fresh())

    # -- windows ---------------------------------------------------------------------------
    def _windows(self, node: Node, exprs: list[exp.Expr]) -> tuple[Node, list[exp.Expr]]:
        windows: list[exp.Window] = []
        for e in exprs:
            windows.extend(w for w in e.find_all(exp.Window))
        if not windows:
            return node, exprs
        partitions: list[set[str]] = []
        for w in windows:
            if w.args.get("spec") is not None and w.args["spec"].args.get("kind"):
                pass  # frames are fine: the whole partition is recomputed
            partitions.append({p.sql("spark") for p in (w.args.get("partition_by") or [])})
        common = set.intersection(*partitions) if partitions else set()
        first = windows[0].args.get("partition_by") or []
        partition_by = tuple(p for p in first if p.sql("spark") in common)
        func_cols = tuple(self.fresh() for _ in windows)
        # the input's columns the SELECT shows or the functions read: rows equal in all of
        # them make the same rows above whichever order they take among themselves
        used = {c.name for e in exprs for c in e.find_all(exp.Column) if not c.table}
        definitions = {c: defining(node, c, self.schema) for c in node.columns if c in used}
        # a source's MAP (read by the query through a value, its keys, ...) tells rows
        # apart by its entries, an array Spark can order when the values can be
        breakers: list[exp.Expr] = [
            exp.Anonymous(this="map_entries", expressions=[col(c)])
            if isinstance(d, exp.Column) and _orderable_map(d.type)
            else col(c)
            for c, d in definitions.items()
        ]
        unordered = [
            c
            for c, d in definitions.items()
            if holds_map(d) and not (isinstance(d, exp.Column) and _orderable_map(d.type))
        ]
        if unordered and any(breaks_ties(w) for w in windows):
            raise NotIncremental(  # Spark cannot order a MAP, nor anything holding one
                "WINDOW_TIES",
                "window",
                "rows tied in a window's ORDER BY would be told apart by a MAP column, "
                "which Spark cannot order; recomputed FULL",
            )
        funcs: list[exp.Expr] = []
        running: list[exp.Expr] = []  # the first steps of functions over tied peers
        running_cols: list[str] = []
        running_by: list[list[exp.Expr]] = []
        for w in windows:
            if not runs_over_peers(w):
                funcs.append(total_order(w.copy(), breakers))
                continue
            value, position = self.fresh(), self.fresh()
            run, numbered, at_peer = in_two_steps(w, breakers, value, position)
            running += [run, numbered]
            running_cols += [value, position]
            running_by.append(list(w.args.get("partition_by") or []))
            funcs.append(at_peer)
        if running:  # one window below for all of them: one more level, however many
            shared = set.intersection(*({p.sql("spark") for p in by} for by in running_by))
            below = tuple(p.copy() for p in running_by[0] if p.sql("spark") in shared)
            node = Window(node, below, tuple(running), tuple(running_cols))
        window_node = Window(node, partition_by, tuple(funcs), func_cols)
        mapping = {id(w): c for w, c in zip(windows, func_cols, strict=True)}

        def replace(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Window) and id(n) in mapping:
                return col(mapping[id(n)])
            return n

        return window_node, [e.transform(replace, copy=False) for e in exprs]

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, e: exp.Expr, scope: Scope) -> exp.Expr:
        """Rewrite column references to internal names."""

        def fn(n: exp.Expr) -> exp.Expr:
            if isinstance(n, exp.Column):
                key = (n.table.lower(), n.name.lower())
                if key not in scope:
                    raise NotIncremental(
                        "UNRESOLVED_QUERY", "column", f"cannot resolve {n.sql('spark')}"
                    )
                return col(scope[key])
            if isinstance(n, exp.Subquery) or subquery.is_exists_subquery(n):
                raise NotIncremental(
                    "SUBQUERY_EXPRESSION", "expression", f"subquery in {e.sql('spark')[:60]}"
                )
            return n

        return e.copy().transform(fn, copy=False)


def rewrite_tree(root: exp.Expr, fn: Callable[[exp.Expr], exp.Expr | None]) -> exp.Expr:
    """Copy of ``root`` where every node for which ``fn`` returns a replacement is
    replaced, without descending into replacements (unlike sqlglot's transform, which
    would also rewrite inside them)."""
    root = root.copy()
    replaced = fn(root)
    if replaced is not None:
        return replaced

    def visit(node: exp.Expr) -> None:
        for child in list(node.iter_expressions()):
            new = fn(child)
            if new is not None:
                child.replace(new)
            else:
                visit(child)

    visit(root)
    return root


def _refuse_unmodelled(tree: exp.Query) -> None:
    """Spark constructs the operator tree cannot express: they refresh FULL, with a code."""
    nodes = list(tree.walk())
    if any(isinstance(n, exp.TableSample) for n in nodes):
        raise NotIncremental(
            "TABLESAMPLE",
            "TABLESAMPLE",
            "the changed rows alone cannot say which rows a sample keeps; recomputed FULL",
        )
    for n in nodes:
        if isinstance(n, exp.Pivot) and not isinstance(n.parent and n.parent.parent, exp.From):
            # pivot.py rewrites a lone FROM relation's; one sqlglot hangs on a join
            # (Spark pivots the whole FROM clause) no operator would see
            kind = "UNPIVOT" if n.args.get("unpivot") else "PIVOT"
            raise NotIncremental("PIVOT", kind, "of a FROM clause with joins; recomputed FULL")
    for n in nodes:
        if (call_name(n) in GENERATORS or isinstance(n, exp.Aliases)) and not modelled_generator(n):
            raise NotIncremental(
                "GENERATOR",
                call_name(n).upper() or "AS (...)",
                "a generator is maintained as a named item of a SELECT list (explode(x) AS v)"
                " or a LATERAL VIEW with named columns; recomputed FULL",
            )
    for select in tree.find_all(exp.Select):
        where = select.args.get("where")
        if where is not None and own_time_windows(where) and _has_star(select):
            # Spark adds the bucket to the columns a SELECT * sees when its WHERE uses it
            raise NotIncremental(
                "TIME_WINDOW", "window", "window() in WHERE under SELECT *; recomputed FULL"
            )


def _orderable_map(t: exp.DataType | None) -> bool:
    """A MAP whose entries Spark can order (its values hold no MAP)."""
    return (
        isinstance(t, exp.DataType)
        and t.is_type(exp.DataType.Type.MAP)
        and not any(d.is_type(exp.DataType.Type.MAP) for v in t.expressions[1:] for d in v.walk())
    )


def _key_pairs(conj: exp.Expr, a: exp.Expr, b: exp.Expr) -> list[tuple[exp.Expr, exp.Expr]] | None:
    """The key pairs an equality ``a = b`` or ``a <=> b`` between two sides stands for
    (see :func:`subquery.null_safe_keys`); None: not a key (it stays a condition)."""
    if isinstance(conj, exp.NullSafeEQ):
        return subquery.null_safe_keys(a, b)
    return [(a, b)]


def _has_star(select: exp.Select) -> bool:
    return any(
        isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
        for e in select.expressions
    )


def _with_ctes(query: exp.Select, ctes: dict[str, exp.Expr]) -> exp.Query:
    """``query`` able to run on its own: the CTEs in scope that it reads, prepended."""
    read = {t.name.lower() for t in query.find_all(exp.Table) if not t.args.get("db")}
    used = [(name, body) for name, body in ctes.items() if name in read]
    if not used:
        return query
    out = query.copy()
    for name, body in used:
        out = out.with_(name, as_=body.copy())
    return out


def _within(e: exp.Expr, scope: Scope) -> bool:
    cols = list(e.find_all(exp.Column))
    return bool(cols) and all((c.table.lower(), c.name.lower()) in scope for c in cols)


def _filter_into_argument(f: exp.Filter) -> exp.AggFunc:
    """``AGG(x) FILTER (WHERE p)`` as ``AGG(CASE WHEN p THEN x END)``: the same value for
    every aggregate with a rule, as they skip NULLs (``COUNT(*)`` counts ``CASE WHEN p
    THEN 1 END``), so the aggregate keeps its delta rule."""
    agg = f.this.copy()
    assert isinstance(agg, exp.AggFunc)
    cond = f.expression.this if isinstance(f.expression, exp.Where) else f.expression
    arg = agg.this
    if isinstance(agg, exp.Count) and (arg is None or isinstance(arg, exp.Star)):
        agg.set("this", exp.case().when(cond.copy(), exp.Literal.number(1)))
    elif isinstance(arg, exp.Distinct):
        arg.set("expressions", [exp.case().when(cond.copy(), e.copy()) for e in arg.expressions])
    elif arg is not None:
        agg.set("this", exp.case().when(cond.copy(), arg.copy()))
    return agg


def _aggregates(e: exp.Expr) -> bool:
    """An aggregate of this SELECT (not one of a subquery, nor a window function's):
    windows are looked for between the call and ``e`` only, since ``e`` may be the item
    of a subquery that sits in a window of an outer query."""
    for n in own_nodes(e):
        if is_aggregate_call(n) and not any(isinstance(p, exp.Window) for p in _up_to(n, e)):
            return True
    return False


def _up_to(n: exp.Expr, top: exp.Expr) -> list[exp.Expr]:
    """The ancestors of ``n`` up to ``top`` (included)."""
    out = []
    while n is not top and n.parent is not None:
        n = n.parent
        out.append(n)
    return out


def _refuse_null_folded(operator: str, values: list[exp.Expr]) -> None:
    if subquery.folds_to_null(values):
        raise NotIncremental(
            "SUBQUERY_EXPRESSION",
            operator,
            "a value with a NULL in it, which Spark's optimizer may fold to NULL and then "
            f"answer {operator} (subquery) with NULL before reading the subquery; recomputed",
        )


def _plain_item(e: exp.Expr) -> bool:
    """A select item that neither aggregates nor generates rows."""
    return not _aggregates(e) and not generates(e)


def _in_aggregate_call(n: exp.Expr) -> bool:
    """Whether ``n`` is a value of each row an aggregate reads: in its argument or its
    FILTER (both are read below the aggregate)."""
    return any(
        is_aggregate_call(a) or (isinstance(a, exp.Filter) and is_aggregate_call(a.this))
        for a in _ancestors(n)
    )


def _ancestors(n: exp.Expr) -> list[exp.Expr]:
    out = []
    parent = n.parent
    while parent is not None:
        out.append(parent)
        parent = parent.parent
    return out


def reads_nothing(query: exp.Expr) -> bool:
    """Whether ``query`` reads no table and nothing of an outer query: rows of literals
    (``VALUES``, a SELECT without FROM, queries over only those), the same at every
    snapshot. A table function or a CTE's name counts as reading (both are Tables);
    a column must name a relation defined inside (an inner alias shadows an outer one
    of the same name, as in Spark), so a correlated query never counts."""
    if query.find(exp.Table) is not None:
        return False
    inner = {a.name.lower() for a in query.find_all(exp.TableAlias) if a.name}
    return all(c.table and c.table.lower() in inner for c in query.find_all(exp.Column))


def _values_names(values: exp.Values) -> list[str]:
    """A VALUES relation's column names: its alias's, or Spark's col1, col2, ..."""
    alias = values.args.get("alias")
    if alias is not None and alias.columns:
        return [c.name for c in alias.columns]
    first = values.expressions[0] if values.expressions else None
    width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
    return [f"col{i + 1}" for i in range(width)]


def _name_values_columns(tree: exp.Expr) -> None:
    """``JOIN VALUES (1), (2) AS v ON t.k = v.col1``: sqlglot's qualify does not know
    the names Spark gives a VALUES relation's columns, so they are written out (an alias
    is made up where there is none). The plan's own tree only: a FULL refresh runs the
    query as the user wrote it."""
    taken = {i.name.lower() for i in tree.find_all(exp.Identifier)}
    for values in tree.find_all(exp.Values):
        if not isinstance(values.parent, exp.From | exp.Join):
            continue
        alias = values.args.get("alias")
        if alias is not None and alias.columns:
            continue
        if alias is None or not alias.name:
            name = next(f"_values{i}" for i in itertools.count() if f"_values{i}" not in taken)
            taken.add(name)
            alias = exp.TableAlias(this=exp.to_identifier(name))
        alias.set("columns", [exp.to_identifier(c) for c in _values_names(values)])
        values.set("alias", alias)


def _untyped_column(pairs: list[tuple[exp.Expr, exp.Expr]], width: int) -> bool:
    """Whether a column of an IN's subquery is NULL in every branch: one branch of a
    set operation that is a bare ``SELECT NULL`` takes the other branches' type, as the
    union's column does in Spark (helper-31)."""
    return any(
        all(
            y.type is not None and y.type.this == exp.DataType.Type.NULL for _, y in pairs[i::width]
        )
        for i in range(width)
    )


def _correlated(query: exp.Expr, scope: Scope) -> bool:
    inner_aliases = {t.alias_or_name.lower() for t in query.find_all(exp.Table)}
    inner_aliases |= {s.alias_or_name.lower() for s in query.find_all(exp.Subquery)}
    outer_aliases = {a for a, _ in scope}
    return any(
        c.table and c.table.lower() in outer_aliases and c.table.lower() not in inner_aliases
        for c in query.find_all(exp.Column)
    )
