"""Plan shapes AUTO weighs before maintaining a query, pure (no Spark).

A join's delta reads the *unchanged* side of each of its terms (within the change's key
range when that side is large, see ``rules.PRUNE_MIN_ROWS``). A window's delta reads the
partitions the change touches, old and new (within the change's range of a partition
key when its input is large). When the change's keys spread over all of it, the delta
reads as much as recomputing does, a window's twice as much, and is slower; the
refresh then asks Spark how many rows each would read (``refresh.estimate``), one
statement at a time: each aggregate's input, then what lies above the last aggregate.
These functions say where a statement ends and whether asking is worth its time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dyntables.ivm import rules
from dyntables.plan.ops import RECOMPUTED, Aggregate, Join, Node, Scan, Window, scans


def region(top: Node) -> list[Node]:
    """The nodes a delta rendered at ``top`` computes in one statement: down to the
    sources or to the aggregates below, which the refresh has materialized by then."""
    out: list[Node] = []

    def visit(n: Node) -> None:
        out.append(n)
        if not isinstance(n, Aggregate) or n is top:
            for child in n.children:
                visit(child)

    visit(top)
    return out


def reads_large_input(
    top: Node, changed: Iterable[str], source_rows: Callable[[Scan], int | None]
) -> bool:
    """Whether a join in ``top``'s region has a changed side whose other side stands on
    at least PRUNE_MIN_ROWS source rows, or a window with PARTITION BY a changed input
    that does: only then can a delta read as much as a recompute (and only then is
    asking Spark worth its planning time). ``changed``: the tables with a captured
    change. (A window without PARTITION BY always reads its whole input: AUTO
    recomputes it by its shape, ``rules.ranks_all_rows``.)"""
    changed = set(changed)

    def side_rows(node: Node) -> int:
        return sum(source_rows(s) or 0 for s in scans(node))

    def changes(node: Node) -> bool:
        return any(str(s.table) in changed for s in scans(node))

    for node in region(top):
        if isinstance(node, Window) and node.partition_by:
            below = node.child
            if changes(below) and side_rows(below) >= rules.PRUNE_MIN_ROWS:
                return True
        if not isinstance(node, Join):
            continue
        for this, other in ((node.left, node.right), (node.right, node.left)):
            if changes(this) and side_rows(other) >= rules.PRUNE_MIN_ROWS:
                return True
    return False


def recomputes_large_input(
    node: Aggregate, changed: Iterable[str], source_rows: Callable[[Scan], int | None]
) -> bool:
    """Whether ``node`` recomputes every group its change touches (an aggregate with no
    running state, such as STDDEV) from an input of at least PRUNE_MIN_ROWS source rows:
    that read is weighed too (it may cover the whole input when the change's groups lie
    all over it)."""
    if not any(call.func == RECOMPUTED for call in node.aggs):
        return False
    scanned = scans(node.child)
    changed = set(changed)
    return (
        any(str(s.table) in changed for s in scanned)
        and sum(source_rows(s) or 0 for s in scanned) >= rules.PRUNE_MIN_ROWS
    )
