"""Incremental view maintenance: one delta rule per operator (Z-sets, DBSP style).

Pure: sqlglot trees in, sqlglot trees out. The refresh executor (dyntables.refresh)
registers source deltas as views, runs stateful operators and executes the SQL.
"""
