"""A chart of the comparison: each backend's time as a multiple of hand-written NumPy's.

``python benchmarks/compare.py --chart ratios.svg`` calls :func:`write_chart` with the results
it has just measured; the format follows the file's extension (``.svg``, ``.png``, ``.pdf``).
It needs matplotlib (``pip install matplotlib``); without it, ``compare.py`` still prints its
table and says what to install.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import workloads as wl

# One colour per backend, the same in every chart.
COLORS = {"numpy": "#4c72b0", "fastgrad": "#dd8452", "fastgrad-exec": "#f2b880",
          "autograd": "#55a868", "torch": "#c44e52", "jax": "#8172b3", "jax-jit": "#b8aee0",
          "mxnet": "#64b5cd"}


def ratios(results) -> tuple[list[str], dict[str, list[float | None]]]:
    """Workload titles and, per backend other than NumPy, its median over NumPy's (None when
    it did not run)."""
    by_workload: dict[str, dict[str, float]] = {}
    titles: list[str] = []
    for r in results:
        if r.workload.key not in by_workload:
            by_workload[r.workload.key] = {}
            titles.append(f"[{r.workload.key}] {r.workload.slug}")
        if r.status == "ok":
            by_workload[r.workload.key][r.backend] = r.median
    out: dict[str, list[float | None]] = {}
    for name in wl.BACKEND_NAMES:
        if name == "numpy":
            continue
        row = []
        for cells in by_workload.values():
            base, value = cells.get("numpy"), cells.get(name)
            row.append(value / base if base and value else None)
        if any(v is not None for v in row):
            out[name] = row
    return titles, out


def write_chart(results: Sequence, path: str, title: str = "") -> str:
    """Draw the ratios as grouped horizontal bars on a log scale and save them to ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles, by_backend = ratios(results)
    n = len(by_backend)
    height = 0.8 / max(n, 1)
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.45 * len(titles) * max(n, 1)))
    for i, (name, row) in enumerate(by_backend.items()):
        ys = [k + (i - (n - 1) / 2) * height for k in range(len(titles))]
        values = [v if v is not None else math.nan for v in row]
        ax.barh(ys, values, height=height * 0.9, label=name, color=COLORS.get(name))
        for y, v in zip(ys, row):
            if v is not None:
                ax.text(v, y, f" {v:.2g}", va="center", fontsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(titles)), titles)
    ax.invert_yaxis()
    ax.set_xlabel("time / hand-written NumPy's (log scale; below 1 is faster)")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
