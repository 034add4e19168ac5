"""The DT's query as a sqlglot tree: what it reads, whether it is deterministic, and the
same query with every source pinned to a snapshot (``VERSION AS OF``).

Pure: no Spark import. Names are qualified by a caller-supplied function so the rules
of the current catalog/namespace stay in the facade.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel, ParseError, UnsupportedError
from sqlglot.tokens import Token, TokenType

from dyntables.errors import NonDeterministicQueryError, SqlSyntaxError, UnsupportedQueryError
from dyntables.sql.tokens import TableName, back_quoted, tokenize

Qualifier = Callable[[TableName], TableName]

# Functions whose value changes between two evaluations over the same data.
NON_DETERMINISTIC_CLASSES: tuple[type[exp.Expr], ...] = (
    exp.Rand,
    exp.Randn,
    exp.Uuid,
    exp.CurrentTimestamp,
    exp.CurrentTime,
    exp.Localtimestamp,
    exp.Shuffle,
)
NON_DETERMINISTIC_NAMES = frozenset(
    {
        "now",
        "random",
        "rand",
        "randn",
        "uuid",
        "monotonically_increasing_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "spark_partition_id",
        "current_timestamp",
        "localtimestamp",
        "unix_timestamp",
    }
)
# calls reading the session a query runs in (see session_calls); current_timezone() is
# none: the zone is recorded at CREATE and set for each refresh
SESSION_CLASSES: tuple[type[exp.Expr], ...] = (
    exp.CurrentUser,
    exp.SessionUser,
    exp.CurrentDatabase,
    exp.CurrentSchema,
    exp.CurrentCatalog,
)
SESSION_NAMES = frozenset(
    {
        "user",
        "current_user",
        "session_user",
        "current_database",
        "current_schema",
        "current_catalog",
    }
)
# words Spark reads as a column (or table) of that name where there is one, else as a
# call, which sqlglot reads them as (and writes current_user back as CURRENT_USER())
_SESSION_WORDS = frozenset({"current_user", "session_user", "user"})
_CLOCK_WORDS = frozenset({"current_timestamp"})
_A_BARE_WORD = re.compile(r"\b(current_user|session_user|user|current_timestamp)\b", re.IGNORECASE)
# tokens after which a word names a table (FROM user, JOIN user)
_BEFORE_A_TABLE = (TokenType.FROM, TokenType.JOIN, TokenType.TABLE, TokenType.INTO)


# Calls sqlglot would not parse, or would write back with another meaning, read under a
# placeholder name and restored as plain calls, written back as the user wrote them
# (with the type Spark gives them, where known: plain calls are untyped to sqlglot).
# Each was checked against Spark (values differ after sqlglot's round trip):
# - window(ts, '1 hour'): WINDOW is the named-window keyword to sqlglot, no parse;
# - array_size(a): read as size(a), -1 (not NULL) over a NULL array;
# - log10(x): written LOG(10, x): log10(1000) is 3.0, LOG(10, 1000) 2.9999999999999996;
# - to_date(s, 'yyyy-MM-dd'): the default format dropped, TO_DATE(s) parses like a CAST
#   ('2016' gives a date, not NULL); to_timestamp(x) becomes a CAST (true: a timestamp);
# - datetime patterns (date_format, from_unixtime, to_timestamp, ...): a lone 'y'
#   written 'yyyy', letters inside quoted text rewritten;
# - date_trunc/trunc: a unit that is not a literal written as one, 'Q' as 'QUARTER';
# - get_json_object: paths normalized ('a' is NULL in Spark, '$.a' is not);
# - regexp_extract(s, p, -1): the index dropped; unix_date: INT written as a BIGINT
#   DATEDIFF; date_sub(d, '1'): written as an addition Spark refuses;
# - current_catalog(): written without its parentheses, which Spark cannot resolve.
_PROTECTED_TYPES: dict[str, str | None] = {
    "window": None,
    "array_size": "INT",
    "log10": "DOUBLE",
    "to_date": "DATE",
    "to_timestamp": "TIMESTAMP",
    "to_timestamp_ntz": "TIMESTAMP_NTZ",
    "to_timestamp_ltz": "TIMESTAMP",
    "try_to_timestamp": "TIMESTAMP",
    "to_unix_timestamp": "BIGINT",
    "date_format": "STRING",
    "from_unixtime": "STRING",
    "date_trunc": "TIMESTAMP",
    "trunc": "DATE",
    "get_json_object": "STRING",
    "regexp_extract": "STRING",
    "regexp_extract_all": "ARRAY<STRING>",
    "unix_date": "INT",
    "date_sub": "DATE",
    "current_catalog": "STRING",
}
_PROTECTED_CALLS = {name.upper(): f"dyntables_{name}_fn" for name in _PROTECTED_TYPES}
_RESTORED_CALLS = {v: k.lower() for k, v in _PROTECTED_CALLS.items()}


def protected_call_type(node: exp.Expr) -> exp.DataType | None:
    """The type Spark gives a restored plain call (sqlglot leaves plain calls untyped)."""
    if not isinstance(node, exp.Anonymous):
        return None
    type_sql = _PROTECTED_TYPES.get(node.name.lower())
    return None if type_sql is None else exp.DataType.build(type_sql, dialect="spark")


def _protect_calls(text: str) -> str:
    try:
        tokens = tokenize(text)
    except Exception:
        return text
    out, last = [], 0
    for tok, nxt in zip(tokens, tokens[1:], strict=False):
        placeholder = _PROTECTED_CALLS.get(tok.text.upper())
        if (
            placeholder
            and nxt.token_type == TokenType.L_PAREN
            and tok.token_type != TokenType.STRING
        ):
            out.append(text[last : tok.start])
            out.append(placeholder)
            last = tok.end + 1
    out.append(text[last:])
    return "".join(out)


def _restore_calls(node: exp.Expr) -> exp.Expr:
    # renamed in place: a new node would hide its arguments' own protected calls
    # (trunc(to_date(...), 'MM')) from the rest of the transform
    if isinstance(node, exp.Anonymous) and node.name.lower() in _RESTORED_CALLS:
        node.set("this", _RESTORED_CALLS[node.name.lower()])
    return node


def _nulls_option_after_filter(node: exp.Expr) -> exp.Expr:
    """``FIRST(x, true) FILTER (WHERE p)`` reads as a FILTER around ``FIRST(x) IGNORE
    NULLS``, which sqlglot writes back in that order, where Spark's grammar takes the
    FILTER first: ``FIRST(x) FILTER (WHERE p) IGNORE NULLS``, as Spark spells it."""
    if isinstance(node, exp.Filter) and isinstance(node.this, exp.IgnoreNulls | exp.RespectNulls):
        option = node.this
        return type(option)(this=exp.Filter(this=option.this, expression=node.expression))
    return node


def _any_as_bool_or(node: exp.Expr) -> exp.Expr:
    """Spark's aggregate ``ANY(p)`` (BOOL_OR's other name), which sqlglot reads as the
    quantifier of a comparison (``x LIKE ANY (...)``, ``x = ANY (subquery)``): as
    BOOL_OR, which it is, where no comparison takes it."""
    if (
        isinstance(node, exp.Any)
        and not isinstance(node.parent, exp.Predicate)
        and not isinstance(node.this, exp.Query | exp.Subquery | exp.Tuple)
    ):
        arg = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
        return exp.LogicalOr(this=arg.copy())
    return node


class _SparkReader(Spark):
    """Spark as sqlglot reads it, but for ``struct(a = b)``: sqlglot's parser reads an
    ``=`` among STRUCT's arguments as DuckDB's ``key = value`` (a field named ``a``
    holding ``b``, written back ``STRUCT(b AS a)``), where Spark, which names a field
    only with AS, compares (a field ``col1``, true or false)."""

    class Parser(Spark.Parser):  # type: ignore[misc,valid-type]
        KEY_VALUE_DEFINITIONS = (exp.Alias, exp.PropertyEQ)
        FUNCTIONS = {**Spark.Parser.FUNCTIONS, "NAMED_STRUCT": lambda args: _named_struct(args)}


def _named_struct(args: list[exp.Expr]) -> exp.Struct:
    """named_struct('f', v, ...) as sqlglot reads it (STRUCT(v AS f, ...)), its names
    marked as the user's: they have no position in the text, like the names sqlglot's
    parser makes up (col1), which :func:`_struct_field_named_by_key` replaces."""
    fields: list[exp.Expr] = []
    for key, value in zip(args[::2], args[1::2], strict=False):
        name = exp.to_identifier(key.name)
        name.meta[_USER_NAMED] = True
        fields.append(exp.PropertyEQ(this=name, expression=value))
    return exp.Struct(expressions=fields)


_USER_NAMED = "dyntables_user_named"


def parse_query(text: str) -> exp.Query:
    """Parse a DT's defining query; it must be a SELECT (or set operation of SELECTs)."""
    protected = _protect_calls(_bare_words_as_names(text))
    try:
        trees = [
            t.transform(_restore_calls)
            .transform(_nulls_option_after_filter)
            .transform(_any_as_bool_or)
            .transform(_struct_field_named_by_key)
            .transform(_struct_row_as_named_struct)
            .transform(_seed_of_a_sample_without_draw)
            for t in sqlglot.parse(protected, read=_SparkReader)
            if t is not None
        ]
    except ParseError as exc:
        first = str(exc).splitlines()[0]
        raise SqlSyntaxError(
            f"cannot parse the query (lines and columns count from the text after AS): {first}"
        ) from exc
    if len(trees) != 1 or not isinstance(trees[0], exp.Query):
        raise UnsupportedQueryError(
            "a dynamic table is defined by one SELECT query (AS SELECT ...); "
            f"got: {' '.join(text.split())[:80]}"
        )
    _check_written_back(text, trees[0])
    return trees[0]


def parse_rows(text: str) -> exp.Expr:
    """Rows this package wrote as Spark text (a :class:`~dyntables.plan.ops.Constant`'s),
    read back as :func:`parse_query` reads a user's query: read by Spark's own parser, a
    VALUES row's named_struct would be written back as STRUCT(...), the row's columns
    (bug-struct-fields-written-back.scn)."""
    return sqlglot.parse_one(text, read=_SparkReader).transform(_struct_row_as_named_struct)


# Calls sqlglot parses with fewer arguments than Spark takes, dropping the rest without a
# word: name -> the arguments it keeps
_TRUNCATED_CALLS = {"percentile": 2}


def _struct_field_named_by_key(node: exp.Expr) -> exp.Expr:
    """``struct(st['g'], m['x'], a[0].h, (k))``: Spark names a field after the key or
    field it extracts (``g``, ``x``, ``h``) and after a column in parentheses (``k``),
    where sqlglot's parser names it by position (``col1``) and writes that name back
    (``element_at(m, 'x')``, read as the same Bracket with an offset, is Spark's
    ``col<n>``). A name the parser made has no position in the text; the user's own
    keep it."""
    if isinstance(node, exp.Struct):
        for field in node.expressions:
            if not isinstance(field, exp.PropertyEQ) or field.this.meta:
                continue
            value = field.expression.unnest()
            name: str | None = None
            if (
                isinstance(value, exp.Bracket)
                and not value.args.get("offset")
                and len(value.expressions) == 1
                and isinstance(value.expressions[0], exp.Literal)
                and value.expressions[0].is_string
            ):
                name = value.expressions[0].this
            elif isinstance(value, exp.Dot) and isinstance(value.expression, exp.Identifier):
                name = value.expression.name
            elif isinstance(value, exp.Column) and field.expression is not value:
                name = value.name
            if name is not None:
                field.set("this", exp.to_identifier(name))
    return node


def _struct_row_as_named_struct(node: exp.Expr) -> exp.Expr:
    """``VALUES (named_struct('f', 1))``: one column of type STRUCT<f: INT> to Spark.
    sqlglot writes named_struct back as ``STRUCT(1 AS f)``, and Spark reads a VALUES
    row that is one STRUCT(...) call as the row's columns (one INT column here): such a
    struct is written back as the named_struct it was."""
    if isinstance(node, exp.Struct) and all(
        isinstance(f, exp.PropertyEQ) and f.this.meta.get(_USER_NAMED) for f in node.expressions
    ):
        row = node.parent
        if isinstance(row, exp.Tuple) and len(row.expressions) == 1:
            row = row.parent
        if isinstance(row, exp.Values):
            args: list[exp.Expr] = []
            for f in node.expressions:
                args += [exp.Literal.string(f.this.name), f.expression]
            return exp.Anonymous(this="named_struct", expressions=args)
    return node


def _check_written_back(text: str, tree: exp.Query) -> None:
    """Every refresh runs the query as sqlglot writes it back, so a construct it would
    write back with another meaning is refused here, with what to write instead, rather
    than computed wrong: PERCENTILE_CONT/PERCENTILE_DISC ... WITHIN GROUP (written back
    as PERCENTILE_APPROX), PERCENTILE's frequency (dropped at parse), and whatever the
    Spark generator reports it cannot express (TO_CHAR's format, ...)."""
    problem: str | None = None
    if tree.find(exp.WithinGroup) is not None:
        problem = (
            "PERCENTILE_CONT / PERCENTILE_DISC ... WITHIN GROUP (ORDER BY x) would be computed "
            "as PERCENTILE_APPROX; write PERCENTILE(x, p) (exact, interpolated like "
            "PERCENTILE_CONT; PERCENTILE(x, 1 - p) for ORDER BY x DESC)"
        )
    misread = _misread_operator(tree)
    if misread is not None:
        problem = (
            f"sqlglot groups `{misread.sql('spark')[:80]}` otherwise than Spark's operator "
            "precedence does; add parentheses to say which is meant"
        )
    for spec in tree.find_all(exp.WindowSpec):
        bounds = [spec.args.get(k) for k in ("start", "end")]
        if problem is None and any(isinstance(b, exp.Add) and _interval_sum(b) for b in bounds):
            problem = (
                "a window frame bounded by a multi-unit interval (INTERVAL 1 DAY 12 HOURS) "
                "would be written back as a sum Spark refuses as a bound; write one literal "
                "(INTERVAL '1 12' DAY TO HOUR)"
            )
    for name, kept in _TRUNCATED_CALLS.items():
        if problem is None and _max_arguments(text, name) > kept:
            problem = f"{name.upper()} with more than {kept} arguments would lose the others"
    if problem is None:
        try:
            tree.sql("spark", unsupported_level=ErrorLevel.RAISE)
        except UnsupportedError as exc:
            problem = f"{str(exc).splitlines()[0]}; write the query without it"
    if problem is not None:
        raise UnsupportedQueryError(
            f"dynamic tables cannot run this query as written yet: {problem}"
        )


# Spark's binary operators, tightest first (SqlBaseParser's valueExpression): sqlglot
# puts &, ^ and | on one level and || below + and -, and it reads a comparison beside
# LIKE, RLIKE, IN, BETWEEN or IS as the comparison of the predicate, where Spark reads
# the predicate of the comparison
_SPARK_LEVELS: dict[type[exp.Expr], int] = {
    **dict.fromkeys((exp.Mul, exp.Div, exp.Mod, exp.IntDiv), 1),
    **dict.fromkeys((exp.Add, exp.Sub, exp.DPipe), 2),
    exp.BitwiseAnd: 3,
    exp.BitwiseXor: 4,
    exp.BitwiseOr: 5,
    **dict.fromkeys(
        (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ), 6
    ),
}
_PREDICATES = (exp.Like, exp.ILike, exp.RegexpLike, exp.In, exp.Between, exp.Is)


def _misread_operator(tree: exp.Expr) -> exp.Expr | None:
    """An operator whose operand, written without parentheses (the parser keeps the
    user's as Paren nodes), Spark's grammar would not give it: sqlglot read the text
    with other precedences, and the query it writes back means something else."""
    for node in tree.walk():
        level = _SPARK_LEVELS.get(type(node))
        if level is None:
            continue
        for key, tighter_or_equal in (("this", True), ("expression", False)):
            child = node.args.get(key)
            inner = child.this if isinstance(child, exp.Not) else child
            if isinstance(inner, _PREDICATES):
                return node
            if not isinstance(child, exp.Expr) or _interval_sum(child):
                continue
            child_level = _SPARK_LEVELS.get(type(child))
            if child_level is None:
                continue
            if child_level > level or (child_level == level and not tighter_or_equal):
                return node
    return None


def _interval_sum(node: exp.Expr) -> bool:
    """``INTERVAL 1 DAY 2 HOURS``, which the parser reads as a sum of intervals of its own
    making: one literal to Spark."""
    return isinstance(node, exp.Add) and all(
        isinstance(n, exp.Interval) or _interval_sum(n) for n in (node.this, node.expression)
    )


def _max_arguments(text: str, name: str) -> int:
    """The most arguments any call of function ``name`` has in ``text`` (0: none)."""
    tokens = tokenize(text) if name in text.lower() else []
    most = 0
    for i, token in enumerate(tokens[:-1]):
        if token.text.lower() != name or tokens[i + 1].token_type != TokenType.L_PAREN:
            continue
        depth, count = 0, 1
        for t in tokens[i + 1 :]:
            if t.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
                depth += 1
            elif t.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
                depth -= 1
                if depth == 0:
                    break
            elif t.token_type == TokenType.COMMA and depth == 1:
                count += 1
        most = max(most, count)
    return most


def table_name(table: exp.Table) -> TableName:
    return TableName(tuple(p.name for p in table.parts))


def _with_of(node: exp.Expr) -> exp.With | None:
    value = node.args.get("with_") or node.args.get("with")
    return value if isinstance(value, exp.With) else None


def table_refs(query: exp.Expr) -> list[tuple[exp.Table, exp.CTE | None]]:
    """Every table reference with the CTE it names (None: a real table), by Spark's
    scoping rules: a WITH's names are visible in its query and in the CTEs after them (not
    in their own body, so ``WITH t AS (SELECT ... FROM t)`` reads the table t), an inner
    WITH shadows an outer one, and a WITH inside a subquery is invisible outside it."""
    found: list[tuple[exp.Table, exp.CTE | None]] = []

    def visit(node: exp.Expr, visible: dict[str, exp.CTE]) -> None:
        with_ = _with_of(node) if isinstance(node, exp.Query) else None
        if with_ is not None:
            visible = dict(visible)
            for cte in with_.expressions:
                visit(cte.this, visible)
                visible[cte.alias_or_name.lower()] = cte
            for value in node.args.values():
                if value is with_:
                    continue
                for child in value if isinstance(value, list) else [value]:
                    if isinstance(child, exp.Expr):
                        visit(child, visible)
            return
        if isinstance(node, exp.Hint):  # BROADCAST(t0) names a relation of the query
            return
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):  # not range(10)
            unqualified = not node.args.get("db") and not node.args.get("catalog")
            found.append((node, visible.get(node.name.lower()) if unqualified else None))
        for child in node.iter_expressions():
            visit(child, visible)

    visit(query, {})
    return found


def source_tables(query: exp.Query, qualify: Qualifier) -> list[TableName]:
    """The tables the query reads, qualified, in first-seen order (CTE references are not
    tables; a CTE's own name inside its body is)."""
    seen: dict[TableName, None] = {}
    for table, cte in table_refs(query):
        if cte is None:
            seen[qualify(table_name(table))] = None
    return list(seen)


def refs_read(query: exp.Query, qualify: Qualifier) -> dict[TableName, frozenset[str]]:
    """The branches and tags the query reads by name (``t VERSION AS OF 'b'``), by
    table. A ref moves on its own, without a commit to the table's main history, so a
    refresh records where each stood."""
    found: dict[TableName, set[str]] = {}
    for table, cte in table_refs(query):
        version = table.args.get("version")
        if cte is not None or not isinstance(version, exp.Version):
            continue
        value = version.expression
        if (
            str(version.this).upper() == "VERSION"
            and isinstance(value, exp.Literal)
            and value.is_string
        ):
            found.setdefault(qualify(table_name(table)), set()).add(value.name)
    return {name: frozenset(refs) for name, refs in found.items()}


def names_beyond_tables(query: exp.Expr) -> list[str]:
    """Relations named with more parts than catalog.namespace.table
    (``lakehouse.public.t0.branch_b``): a branch, tag, snapshot or metadata table
    selected by its name, which no rule tracks as a source."""
    return [t.sql("spark") for t in query.find_all(exp.Table) if isinstance(t.this, exp.Dot)]


def files_read_by_path(query: exp.Expr) -> list[str]:
    """Relations that are files named by their path (``parquet.`/data/x```): no commit
    says what changed in them. Spark reads a path only after a format, so a CTE or a
    view named `x/y` is not one."""
    return [
        t.sql("spark")
        for t in query.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier)
        and t.args.get("db") is not None
        and not t.args.get("catalog")
        and ("/" in t.name or ":" in t.name)
    ]


def semi_join_fields_as_dots(tree: exp.Expr) -> exp.Expr:
    """``l1.st.a`` in the ON of a LEFT SEMI or ANTI JOIN of ``t1 AS l1`` written as the
    field ``a`` of the column ``l1.st``: sqlglot reads three parts as a column ``a`` of a
    table ``st`` and, since a semi join's table is not selected, cannot resolve it
    (UNRESOLVED_QUERY, a needless FULL); elsewhere qualify tells fields from columns."""
    for join in list(tree.find_all(exp.Join)):
        if str(join.args.get("kind") or "").upper() not in ("SEMI", "ANTI"):
            continue
        alias = join.this.alias_or_name.lower()
        on = join.args.get("on")
        if not alias or on is None:
            continue
        for column in list(on.find_all(exp.Column)):
            parts = column.parts
            if len(parts) >= 3 and parts[0].name.lower() == alias:
                field: exp.Expr = exp.column(parts[1], table=parts[0])
                for part in parts[2:]:
                    field = exp.Dot(this=field, expression=part)
                column.replace(field)
    return tree


def scoped_names(query: exp.Query, qualify: Qualifier) -> exp.Query:
    """A copy of ``query`` in which every name means the same wherever it is moved:

    * each CTE gets a name unique in the query (its references keep the old name as their
      alias), so sqlglot's Spark generator, which hoists nested WITHs to the top (a Spark 2
      rule), can neither clash two same-named CTEs nor let a CTE shadow a table elsewhere;
    * a table read without an alias gets its own name as alias, and columns qualified with
      the schema-qualified table name (``public.t0.k``) are qualified with that alias, so
      they still resolve once the table is replaced by a pinned or internal one.
    """
    tree = query.copy()
    refs = table_refs(tree)
    taken = {i.name.lower() for i in tree.find_all(exp.Identifier)}
    counter = itertools.count()
    renamed: dict[int, str] = {}
    for definition in tree.find_all(exp.CTE):
        name = f"_cte{next(counter)}_{definition.alias_or_name}"
        while name.lower() in taken:
            name = f"_cte{next(counter)}_{definition.alias_or_name}"
        taken.add(name.lower())
        renamed[id(definition)] = name
    by_path: dict[TableName, str | None] = {}
    for table, cte in refs:
        if cte is not None:
            if not table.alias:
                table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
            table.set("this", exp.to_identifier(renamed[id(cte)]))
            continue
        if table.alias:
            continue
        table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        full = qualify(table_name(table))
        # two unaliased tables of one name (different schemas): leave their columns alone
        by_path[full] = None if full in by_path else table.name
    for definition in tree.find_all(exp.CTE):
        definition.args["alias"].set("this", exp.to_identifier(renamed[id(definition)]))
    for column in list(tree.find_all(exp.Column)):
        if not column.args.get("db"):
            continue
        parts = tuple(
            p.name
            for p in (column.args.get("catalog"), column.args.get("db"), column.args.get("table"))
            if p
        )
        target = by_path.get(qualify(TableName(parts)))
        if target is not None:
            column.set("catalog", None)
            column.set("db", None)
            column.set("table", exp.to_identifier(target))
    return tree


# CURRENT_DATE (and CURDATE()) is the one function of time a query may read, as in the
# seeds (``WHERE d >= date_sub(current_date(), 7)``): each refresh reads it once, as a
# DATE literal written into the query, and records the day, so the table equals its
# query on that day, and a delta computed on that day is one of that query. A refresh on
# another day recomputes (the rows a day in or out of a window are no source's change).
_TODAY = "curdate"


def _names(text: str, columns: Collection[str]) -> set[str]:
    """The column names in scope of ``text``'s query, lower-cased: ``columns`` (its
    sources'), and every name it quotes, qualifies, gives (``AS x``) or qualifies with
    (a table's alias: ``x.id``)."""
    tokens = tokenize(text)
    return {c.lower() for c in columns} | {
        t.text.lower()
        for i, t in enumerate(tokens)
        if t.token_type == TokenType.IDENTIFIER
        or _a_name(tokens, i)
        or (i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT)
    }


def session_calls(query: exp.Query, text: str, columns: Collection[str]) -> list[str]:
    """The calls of ``query`` that read the session it runs in (its user, its current
    database or catalog). Spark reads each once per query, but a dynamic table is
    refreshed by other sessions than CREATE's (the scheduler's, another user's), whose
    rows would disagree with those before. ``current_user``, ``session_user`` and
    ``user`` written bare are a column where one of that name is in scope (Spark reads
    it first: checked), a call otherwise."""
    found = [node.sql("spark") for node in query.walk() if _session_call(node)]
    return found + _bare_calls(text, columns, _SESSION_WORDS)


def clock_calls(text: str, columns: Collection[str]) -> list[str]:
    """``current_timestamp`` written bare where no column of that name is in scope:
    Spark reads the clock there (sqlglot reads it as the call wherever it stands)."""
    return _bare_calls(text, columns, _CLOCK_WORDS)


def _bare_calls(text: str, columns: Collection[str], words: frozenset[str]) -> list[str]:
    """The bare ``words`` of ``text`` Spark reads as calls: those naming nothing in
    scope (a table's alias qualifying a column is among the names)."""
    names = _names(text, columns)
    return [f"{w.upper()}()" for w, _, _ in _bare_words(text) if w in words and w not in names]


def reads_context(query: exp.Query, text: str) -> bool:
    """Whether ``query`` (of ``text``) may read its session or, by a bare word, the clock
    (see session_calls, clock_calls)."""
    return bool(_bare_words(text)) or any(map(_session_call, query.walk()))


def _session_call(node: exp.Expr) -> bool:
    return isinstance(node, SESSION_CLASSES) or (
        isinstance(node, exp.Anonymous) and node.name.lower() in SESSION_NAMES
    )


def _bare_words(text: str) -> list[tuple[str, int, int]]:
    """(word, start, end exclusive) of each session or clock
    word (``current_user``, ``current_timestamp``) written without parentheses, not as a
    quoted, qualified or given name, nor a table's (``FROM user``)."""
    if not _A_BARE_WORD.search(text):
        return []  # most queries: no tokenizing
    try:
        tokens = tokenize(text)
    except Exception:
        return []
    out = []
    for i, t in enumerate(tokens):
        word = t.text.lower()
        if word not in _SESSION_WORDS | _CLOCK_WORDS or t.token_type == TokenType.IDENTIFIER:
            continue
        if t.token_type == TokenType.STRING or _a_name(tokens, i):
            continue
        if i and tokens[i - 1].token_type in _BEFORE_A_TABLE:
            continue
        if i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN:
            continue  # a call
        out.append((word, t.start, t.end + 1))
    return out


def _bare_words_as_names(text: str) -> str:
    """``text`` with each bare session or clock word quoted as the name it is (a column,
    or a table alias qualifying one: ``current_user.id``): sqlglot would write
    ``current_user`` back as ``CURRENT_USER()``, a call. One that is no name is refused
    at CREATE (session_calls, clock_calls), so none reaches a refresh."""
    out, at = [], 0
    for _, start, end in _bare_words(text):
        out += [text[at:start], back_quoted(text[start:end])]
        at = end
    return "".join(out) + text[at:]


def _a_name(tokens: list[Token], i: int) -> bool:
    """Whether token ``i`` is a name by where it stands: qualified (``t.current_date``)
    or given (``AS current_date``)."""
    return bool(i) and tokens[i - 1].token_type in (TokenType.DOT, TokenType.ALIAS)


def _today_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` calls CURRENT_DATE: (start, end) offsets, the end exclusive; a
    quoted name, a qualified one (``t.current_date``) or an alias is no call."""
    tokens = tokenize(text)
    spans: list[tuple[int, int]] = []
    for i, t in enumerate(tokens):
        if _a_name(tokens, i):
            continue
        after = tokens[i + 1 : i + 3]
        called = (
            len(after) == 2
            and after[0].token_type == TokenType.L_PAREN
            and after[1].token_type == TokenType.R_PAREN
        )
        if t.token_type == TokenType.CURRENT_DATE:
            spans.append((t.start, (after[1] if called else t).end + 1))
        elif t.token_type == TokenType.VAR and t.text.lower() == _TODAY and called:
            spans.append((t.start, after[1].end + 1))
    return spans


def current_date_unclear(query: exp.Query, text: str, columns: Collection[str]) -> str | None:
    """Why reading ``text``'s CURRENT_DATE as a literal could change its answer, or None.
    A bare ``current_date`` is a column where one of that name is in scope (``columns``:
    the sources', or a name the query itself gives: Spark reads the column first); and
    the name Spark gives an unnamed item (``current_date()``, ``date_sub(current_date(),
    1)``) would be the literal's, another every day."""
    bare = any("(" not in text[start:end] for start, end in _today_spans(text))
    if bare and "current_date" in _names(text, columns):
        return (
            "current_date is also a column's name here, which Spark would read instead: "
            "write current_date() for the day, or the column qualified (t.current_date)"
        )
    for select in query.find_all(exp.Select):
        if _names_unread(select):
            continue
        for item in select.expressions:
            if not isinstance(item, exp.Alias) and item.find(exp.CurrentDate):
                return (
                    f"the column {item.sql('spark')} reads current_date unnamed, and Spark "
                    "would name it after the day it reads: name it (AS ...)"
                )
    return None


# where a subquery's items are read by their names: the relation of a FROM, a JOIN or a
# LATERAL, a CTE's body, a branch of a set operation, a parenthesized query
_NAMED_BY = (exp.From, exp.Join, exp.Lateral, exp.CTE, exp.SetOperation, exp.Subquery)


def _names_unread(select: exp.Select) -> bool:
    """Whether nothing reads ``select``'s items by their names: it is (inside) a scalar
    subquery, an IN's or an EXISTS' subquery, read by value or position."""
    node: exp.Expr = select
    while node.parent is not None:
        parent = node.parent
        if isinstance(parent, (exp.In, exp.Exists, exp.Any, exp.All)):
            return True
        if isinstance(node, exp.Subquery) and not isinstance(parent, _NAMED_BY):
            return True
        node = parent
    return False


def reads_current_date(text: str) -> bool:
    try:
        return bool(_today_spans(text))
    except SqlSyntaxError:
        return False


def on_day(text: str, day: str) -> str:
    """``text`` with each call of CURRENT_DATE replaced by the DATE ``day``
    (YYYY-MM-DD), the rest of the text as written."""
    out, at = [], 0
    for start, end in _today_spans(text):
        out += [text[at:start], f"DATE '{day}'"]
        at = end
    return "".join(out) + text[at:]


def non_deterministic_calls(query: exp.Expr) -> list[str]:
    found: list[str] = []
    for node in query.walk():
        if isinstance(node, NON_DETERMINISTIC_CLASSES):
            found.append(node.sql("spark"))
        elif isinstance(node, exp.StrToUnix) and not node.this:
            found.append("unix_timestamp()")
        elif isinstance(node, exp.Anonymous) and node.name.lower() in NON_DETERMINISTIC_NAMES:
            found.append(node.sql("spark"))
    return found


def random_samples(query: exp.Expr) -> list[str]:
    """The TABLESAMPLE clauses that keep a random part of a table's rows (``50
    PERCENT``, ``BUCKET 3 OUT OF 10``), as written: Spark draws a new seed for each run,
    so a FULL refresh over the same snapshots keeps other rows (rand() by another name;
    with REPEATABLE, rand(42): the draw follows the files' split into tasks). A sample of
    every row, of none, or of the first rows (``2 ROWS``, a LIMIT) is no draw."""
    return [
        node.sql("spark").replace(" SEED (", " REPEATABLE (")
        for node in query.find_all(exp.TableSample)
        if _draws(node)
    ]


def _draws(node: exp.TableSample) -> bool:
    percent, numerator = node.args.get("percent"), node.args.get("bucket_numerator")
    if percent is not None:
        share = _number(percent)
        return share is None or 0 < share < 100
    if numerator is not None:
        n, d = _number(numerator), _number(node.args.get("bucket_denominator"))
        return n is None or d is None or n < d
    return False


def _seed_of_a_sample_without_draw(node: exp.Expr) -> exp.Expr:
    """Spark's ``REPEATABLE (n)``, which sqlglot writes back as ``SEED (n)``, which Spark
    does not read (CREATE failed with a syntax error): dropped from a sample that draws
    nothing (``100 PERCENT``, ``2 ROWS``), whose rows no seed changes. A sample that
    draws is refused by :func:`random_samples`."""
    if isinstance(node, exp.TableSample) and node.args.get("seed") and not _draws(node):
        node.set("seed", None)
    return node


def _number(node: exp.Expr | None) -> float | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return float(node.name)
        except ValueError:
            return None
    return None


def check_deterministic(query: exp.Query, dt_name: str) -> None:
    calls = non_deterministic_calls(query)
    if calls:
        raise non_deterministic(dt_name, calls[0])
    samples = random_samples(query)
    if samples:
        raise NonDeterministicQueryError(
            f"dynamic table {dt_name} samples rows at random ({samples[0]}): a dynamic "
            "table must give the same rows for the same source data, and a sample keeps "
            "other rows each run (with REPEATABLE, once the files are split otherwise). "
            "Sample by a column instead: WHERE "
            "abs(hash(key)) % 100 < 10 keeps the same tenth of the keys every time"
        )


def session_dependent(dt_name: str, call: str) -> NonDeterministicQueryError:
    return NonDeterministicQueryError(
        f"dynamic table {dt_name} uses {call}, which reads the session the query runs in: "
        "the table is refreshed by other sessions (the scheduler's, another user's), "
        "whose rows would disagree with those before. Pass the value in as a literal "
        "('alice', 'sales') or read it from a source column instead"
    )


def non_deterministic(dt_name: str, call: str) -> NonDeterministicQueryError:
    return NonDeterministicQueryError(
        f"dynamic table {dt_name} uses the non-deterministic function {call}: a dynamic "
        "table must give the same rows for the same source data. Pass the value in as a "
        "literal (e.g. DATE '2024-01-01') or read it from a source column instead; for "
        "today's date, current_date() is read once per refresh"
    )


def pin_sources(
    query: exp.Query,
    qualify: Qualifier,
    versions: Mapping[TableName, int | None],
    refs: Mapping[TableName, Mapping[str, int | None]] | None = None,
    shadowed: Mapping[TableName, Collection[str]] | None = None,
) -> exp.Query:
    """A copy of ``query`` reading every source at its snapshot (names first made
    position-independent by :func:`scoped_names`), and every branch or tag it reads by
    name at the snapshot ``refs`` recorded for it (a ref moving during the refresh
    would otherwise be read where it stood later than recorded).

    A source with no snapshot yet (never written) reads as empty, so that a commit racing
    with the refresh cannot slip in unrecorded: filtered by a condition Spark cannot fold
    (see :func:`never_true`; ``shadowed``: the never-written sources' own columns named
    like Iceberg's metadata columns, which hide them).
    """
    pinned = scoped_names(query, qualify)
    for table, cte in table_refs(pinned):
        if cte is not None:
            continue
        name = qualify(table_name(table))
        full = exp.to_table(".".join(back_quoted(p) for p in name.parts), dialect="spark")
        alias = table.args.get("alias")
        alias = alias.copy() if alias else exp.TableAlias(this=exp.to_identifier(table.name))
        # what the reference says besides its name (PIVOT, UNPIVOT, TABLESAMPLE, column
        # aliases) stays with it: dropped, the query would read the plain table
        extras = {
            key: value
            for key, value in table.args.items()
            if value and key not in ("this", "db", "catalog", "alias", "version")
        }
        version = table.args.get("version")
        if version is not None:  # the user pinned it: keep their version
            full.set("version", version.copy())
            value = version.expression
            if isinstance(value, exp.Literal) and value.is_string:
                recorded = (refs or {}).get(name, {}).get(value.name)
                if str(version.this).upper() == "VERSION" and recorded is not None:
                    full.args["version"].set("expression", exp.Literal.number(recorded))
            read: exp.Table | exp.Select = full
        elif versions[name] is None:
            read = exp.select("*").from_(full).where(never_true((shadowed or {}).get(name, ())))
        else:
            full.set(
                "version",
                exp.Version(
                    this="VERSION", kind="AS OF", expression=exp.Literal.number(versions[name])
                ),
            )
            read = full
        # sqlglot writes a table's TABLESAMPLE before its VERSION AS OF, which Spark's
        # grammar refuses; over a subquery it goes where Spark expects it
        if isinstance(read, exp.Table) and "sample" in extras:
            read = exp.select("*").from_(read)
        pinned_ref = read if isinstance(read, exp.Table) else read.subquery()
        pinned_ref.set("alias", alias)
        for key, value in extras.items():
            pinned_ref.set(key, value)
        table.replace(pinned_ref)
    return pinned


# Iceberg's metadata columns no row has a value of, with the condition that says so
_NEVER_MET = (("_pos", "<", 0), ("_spec_id", "<", 0), ("_file", "=", ""))
METADATA_COLUMNS = frozenset(name for name, _, _ in _NEVER_MET)


def never_true(shadowed: Collection[str] = ()) -> exp.Expr:
    """A filter no row passes that Spark's optimizer cannot prove false. ``WHERE false``
    turns a relation into an empty local one at planning time, and Spark 3.5 then
    answers NULL for a correlated ``(SELECT COUNT(*) ... WHERE s.k = t.k)`` instead of
    the 0 it answers over an empty table (so does ``rand() < 0``, even over rows).

    Iceberg's row position ``_pos`` is never negative (nor a partition spec id; nor is a
    data file's path empty), and Spark knows nothing of their values. A table's own
    column of the name hides the metadata column (``shadowed``: those it has); with all
    three hidden, the partition id serves, which is never negative either, but Spark
    calls it non-deterministic and refuses it under an aggregate's argument (``SUM(CASE
    WHEN x IN (SELECT ...) ...)``)."""
    for name, op, value in _NEVER_MET:
        if name not in shadowed:
            column = exp.column(name)
            literal = (
                exp.Literal.number(value) if isinstance(value, int) else exp.Literal.string(value)
            )
            return (
                exp.LT(this=column, expression=literal)
                if op == "<"
                else exp.EQ(this=column, expression=literal)
            )
    return exp.LT(
        this=exp.Anonymous(this="spark_partition_id", expressions=[]),
        expression=exp.Literal.number(0),
    )
