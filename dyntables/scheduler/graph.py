"""The dependency graph between dynamic tables, as plain data.

An edge ``u -> d`` exists when ``u`` is a dynamic table listed in ``d``'s sources. Base
tables are not nodes: nothing schedules them. The scheduler needs three things from the
graph, all pure and cheap at the sizes involved (tens to thousands of tables):

- a topological order, so a cycle refreshes every upstream before its downstreams;
- weakly connected components, so independent pipelines run their cycles
  independently (a slow pipeline never delays an unrelated one);
- the downstream closure of a table, to skip what depends on a failed refresh.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


class GraphCycleError(ValueError):
    """Raised when dynamic tables depend on each other in a loop.

    CREATE refuses a table that reads itself, but a loop through several tables can
    appear when one is replaced; the scheduler then leaves those tables alone.
    """


@dataclass(frozen=True)
class Graph:
    """Upstream edges between dynamic tables: ``upstreams[d]`` are the DTs ``d`` reads."""

    upstreams: Mapping[str, frozenset[str]]
    downstreams: Mapping[str, frozenset[str]] = field(init=False)

    def __post_init__(self) -> None:
        down: dict[str, set[str]] = {name: set() for name in self.upstreams}
        for name, ups in self.upstreams.items():
            for up in ups:
                down.setdefault(up, set()).add(name)
        object.__setattr__(self, "downstreams", {k: frozenset(v) for k, v in down.items()})

    @staticmethod
    def build(edges: Mapping[str, Iterable[str]]) -> Graph:
        """``edges[d]``: every source of ``d``; sources that are not nodes are dropped."""
        nodes = set(edges)
        return Graph(
            {d: frozenset(s for s in srcs if s in nodes and s != d) for d, srcs in edges.items()}
        )

    @property
    def nodes(self) -> list[str]:
        return sorted(self.upstreams)

    def topological(self, nodes: Iterable[str] | None = None) -> list[str]:
        """``nodes`` (default: all) ordered upstream first; ties broken by name so the
        order, and therefore every log and test, is deterministic."""
        chosen = set(self.upstreams if nodes is None else nodes)
        indegree = {n: len(self.upstreams.get(n, frozenset()) & chosen) for n in chosen}
        ready = [n for n, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            node = heapq.heappop(ready)
            order.append(node)
            for down in self.downstreams.get(node, frozenset()):
                if down in indegree:
                    indegree[down] -= 1
                    if indegree[down] == 0:
                        heapq.heappush(ready, down)
        if len(order) != len(chosen):
            stuck = sorted(chosen - set(order))
            raise GraphCycleError(
                "dynamic tables depend on each other in a loop: " + ", ".join(stuck)
            )
        return order

    def cyclic_nodes(self) -> set[str]:
        """Nodes on (or downstream of) a dependency loop: never schedulable."""
        try:
            self.topological()
            return set()
        except GraphCycleError:
            pass
        indegree = {n: len(ups) for n, ups in self.upstreams.items()}
        ready = [n for n, d in indegree.items() if d == 0]
        done: set[str] = set()
        while ready:
            node = ready.pop()
            done.add(node)
            for down in self.downstreams.get(node, frozenset()):
                indegree[down] -= 1
                if indegree[down] == 0:
                    ready.append(down)
        return set(self.upstreams) - done

    def components(self) -> list[frozenset[str]]:
        """Weakly connected components, each a set of table names, sorted by first name."""
        seen: set[str] = set()
        out: list[frozenset[str]] = []
        for start in sorted(self.upstreams):
            if start in seen:
                continue
            stack, members = [start], set()
            while stack:
                node = stack.pop()
                if node in members:
                    continue
                members.add(node)
                stack.extend(self.upstreams.get(node, frozenset()))
                stack.extend(self.downstreams.get(node, frozenset()))
            seen |= members
            out.append(frozenset(members))
        return out

    def downstream_closure(self, node: str) -> set[str]:
        """Every table that reads ``node``, directly or through other tables."""
        out: set[str] = set()
        stack = list(self.downstreams.get(node, frozenset()))
        while stack:
            down = stack.pop()
            if down not in out:
                out.add(down)
                stack.extend(self.downstreams.get(down, frozenset()))
        return out

    def levels(self, nodes: Iterable[str]) -> list[list[str]]:
        """``nodes`` grouped by depth within the subgraph they form (for display)."""
        chosen = set(nodes)
        depth: dict[str, int] = {}
        for node in self.topological(chosen):
            ups = self.upstreams.get(node, frozenset()) & chosen
            depth[node] = 1 + max((depth[u] for u in ups), default=-1)
        grouped: dict[int, list[str]] = {}
        for node, d in depth.items():
            grouped.setdefault(d, []).append(node)
        return [sorted(grouped[d]) for d in sorted(grouped)]
