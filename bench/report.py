"""Tables and plots from ``bench.pipeline`` results.

    .venv/bin/python -m bench.report bench/results/pipeline-*.json [--out bench/results]

Writes ``refresh_vs_change.png`` (refresh time per layer against change size, one line
per method, largest table, per batch kind) and ``refresh_vs_size.png`` (refresh time at a
fixed change size against table size), and prints the markdown table.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.pipeline import LAYERS, Measurement, load_results, summarize

# one colour per method in every panel, whichever methods a panel has
COLORS = {"full": "tab:blue", "hand": "tab:orange", "inc": "tab:green", "auto": "tab:red"}
METHODS = {
    "full": "INSERT OVERWRITE",
    "hand": "hand-written MERGE",
    "inc": "dyntables INCREMENTAL",
    "auto": "dyntables AUTO",
}


def _line(ax: Any, points: list[tuple[float, float]], method: str, label: str) -> None:
    ax.plot(
        [x for x, _ in points],
        [y for _, y in points],
        marker="o",
        label=label,
        color=COLORS[method],
    )


def _median(results: list[Measurement], **key: object) -> float | None:
    values = [m.seconds for m in results if all(getattr(m, k) == v for k, v in key.items())]
    return statistics.median(values) if values else None


def plot(results: list[Measurement], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    sizes = sorted({m.orders for m in results})
    kinds = sorted({m.kind for m in results})
    changes = sorted({m.change_pct for m in results})
    fig, axes = plt.subplots(
        len(kinds), len(LAYERS), figsize=(4 * len(LAYERS), 3.2 * len(kinds)), squeeze=False
    )
    for r, kind in enumerate(kinds):
        # per batch kind, the size measured at the most change sizes (the biggest of those)
        measured = [n for n in sizes if any(m.orders == n and m.kind == kind for m in results)]
        biggest = max(
            measured,
            key=lambda n: (
                len({m.change_pct for m in results if (m.orders, m.kind) == (n, kind)}),
                n,
            ),
        )
        for c, layer in enumerate(LAYERS):
            ax = axes[r][c]
            for method, label in METHODS.items():
                points = [
                    (
                        pct,
                        _median(
                            results,
                            orders=biggest,
                            kind=kind,
                            layer=layer,
                            method=method,
                            change_pct=pct,
                        ),
                    )
                    for pct in changes
                ]
                points = [(x, y) for x, y in points if y is not None]
                if points:
                    _line(ax, points, method, label)
            ax.set_xscale("log")
            ax.set_title(f"{layer}, {kind} batches, {biggest:,} orders", fontsize=9)
            ax.set_xlabel("change (% of orders)")
            ax.set_ylabel("refresh seconds (median)")
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path = out / "refresh_vs_change.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    # fixed change = the same number of changed orders at every size (e.g. 10k rows is 1%
    # of 1M and 0.1% of 10M), measured on insert batches
    by_rows: dict[int, set[int]] = {}
    for m in results:
        if m.kind == "insert":
            by_rows.setdefault(round(m.orders * m.change_pct / 100), set()).add(m.orders)
    shared = [rows for rows, found in sorted(by_rows.items()) if len(found) > 1]
    if shared:
        # the yardstick, 10k changed orders, where both sizes have it
        rows = 10_000 if 10_000 in shared else shared[-1]

        def at(size: int, layer: str, method: str) -> float | None:
            values = [
                m.seconds
                for m in results
                if (m.orders, m.kind, m.layer, m.method) == (size, "insert", layer, method)
                and round(m.orders * m.change_pct / 100) == rows
            ]
            return statistics.median(values) if values else None

        fig, axes = plt.subplots(1, len(LAYERS), figsize=(4 * len(LAYERS), 3.2), squeeze=False)
        for c, layer in enumerate(LAYERS):
            ax = axes[0][c]
            for method, label in METHODS.items():
                points = [(size, at(size, layer, method)) for size in sorted(by_rows[rows])]
                points = [(x, y) for x, y in points if y is not None]
                if points:
                    _line(ax, points, method, label)
            ax.set_xscale("log")
            ax.set_title(f"{layer}, {rows:,} new orders per refresh", fontsize=9)
            ax.set_xlabel("orders in the table")
            ax.set_ylabel("refresh seconds (median)")
            ax.grid(True, alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        path = out / "refresh_vs_size.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("results", nargs="+")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    results = [m for path in args.results for m in load_results(path)]
    print(summarize(results))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in plot(results, out):
        print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
