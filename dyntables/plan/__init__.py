"""Query analysis: sqlglot trees in, frozen plans out (no Spark import)."""
