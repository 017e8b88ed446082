"""The performance targets of issue 17, checked against the medians of one comparison run.

``python benchmarks/compare.py --targets`` prints, after its table, one row per target: the
workload, the target, the ratio the run measured, and whether it is met.  A target compares
two cells of the same run (a backend's median time, or peak memory, over another backend's),
so that the machine's speed cancels out; a target whose cells did not both run is reported as
not measured, never as met.

Examples
--------
>>> import targets
>>> [t.workload for t in targets.TARGETS][:3]
['8', '8', '9']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One target: ``numerator``'s value over ``denominator``'s on ``workload`` at most ``limit``.

    Attributes
    ----------
    workload : str
        Workload key.
    text : str
        The target in words, as the issue states it.
    numerator, denominator : str
        Backend names whose cells are compared.
    limit : float
        Largest ratio that meets the target.
    strict : bool
        The ratio must be below ``limit`` ("faster than"), not at most.
    metric : {"time", "memory"}
        Median time or peak memory.
    at_filing : str
        The value the issue reported when it was filed.
    """

    workload: str
    text: str
    numerator: str
    denominator: str
    limit: float
    strict: bool = False
    metric: str = "time"
    at_filing: str = ""

    def met(self, ratio: float) -> bool:
        """Whether ``ratio`` meets the target."""
        return ratio < self.limit if self.strict else ratio <= self.limit


#: Issue 17's targets, in the issue's order.  The executor targets ("at least 1.3x faster than
#: the imperative path") are ratios executor/imperative of at most 1/1.3.
TARGETS: list[Target] = [
    Target("8", "LeNet step no slower than PyTorch", "fastgrad", "torch", 1.0, at_filing="4.7x"),
    Target("8", "LeNet step at the least faster than hand-written NumPy", "fastgrad", "numpy",
           1.0, strict=True, at_filing="2.0x"),
    Target("9", "LSTM at most 0.5x PyTorch", "fastgrad", "torch", 0.5, at_filing="0.72-0.80x"),
    Target("6", "broadcasting no slower than PyTorch", "fastgrad", "torch", 1.0,
           at_filing="1.27x"),
    Target("1", "tiny ops at most 0.3x PyTorch", "fastgrad", "torch", 0.3, at_filing="0.38x"),
    Target("1", "tiny ops at most 1.6x hand-written NumPy", "fastgrad", "numpy", 1.6,
           at_filing="1.93x"),
    Target("5", "4th derivative at most 0.5x PyTorch", "fastgrad", "torch", 0.5,
           at_filing="0.58x"),
    Target("2", "MLP at most 0.7x PyTorch", "fastgrad", "torch", 0.7, at_filing="0.70x"),
    Target("2", "Executor at least 1.3x faster than imperative", "fastgrad-exec", "fastgrad",
           1 / 1.3),
    Target("8", "Executor at least 1.3x faster than imperative", "fastgrad-exec", "fastgrad",
           1 / 1.3),
    Target("9", "Executor at least 1.3x faster than imperative", "fastgrad-exec", "fastgrad",
           1 / 1.3),
    Target("3", "keep: at most 0.67x hand-written NumPy", "fastgrad", "numpy", 0.67,
           at_filing="0.67x"),
    Target("4", "keep: at most 0.28x PyTorch", "fastgrad", "torch", 0.28, at_filing="0.28x"),
    Target("7", "keep: at most 0.48x PyTorch", "fastgrad", "torch", 0.48, at_filing="0.48x"),
    Target("3", "keep memory at most 0.83x hand-written NumPy", "fastgrad", "numpy", 0.83,
           metric="memory", at_filing="0.83x"),
    Target("4", "keep memory at most 0.41x PyTorch", "fastgrad", "torch", 0.41,
           metric="memory", at_filing="0.41x"),
]

HEADERS = ("workload", "target", "at filing", "measured", "met?")


def _cell_value(cell, metric: str) -> float | None:
    if cell is None or cell.status != "ok":
        return None
    return cell.median if metric == "time" else cell.peak_bytes


def rows(results: Sequence, targets: Sequence[Target] = TARGETS) -> list[tuple[str, ...]]:
    """One printable row per target: workload, target, value at filing, measured ratio, met?

    Parameters
    ----------
    results : sequence of compare.Result
        The cells of one run.
    targets : sequence of Target
        The targets to check.
    """
    cells = {(r.workload.key, r.backend): r for r in results}
    measured_workloads = {r.workload.key for r in results}
    out = []
    for t in targets:
        top = cells.get((t.workload, t.numerator))
        bottom = cells.get((t.workload, t.denominator))
        a, b = _cell_value(top, t.metric), _cell_value(bottom, t.metric)
        if t.workload not in measured_workloads:
            measured, met = "", "not measured (workload not in this run)"
        elif a is None or not b:
            missing = [n for n, v in ((t.numerator, a), (t.denominator, b)) if not v]
            measured, met = "", f"not measured ({', '.join(missing)} did not run)"
        else:
            ratio = a / b
            measured = f"{ratio:.2f}x"
            if t.metric == "memory" and top.memory_method != bottom.memory_method:
                measured += f" ({top.memory_method}/{bottom.memory_method})"
            met = "yes" if t.met(ratio) else "no"
        memory = ", memory" if t.metric == "memory" else ""
        where = f"{t.workload} ({t.numerator}/{t.denominator}{memory})"
        out.append((where, t.text, t.at_filing, measured, met))
    return out


def render(results: Sequence, markdown: bool = False, caveats: Sequence[str] = ()) -> str:
    """The targets table, as text or Markdown, followed by ``caveats`` (one line each)."""
    table = rows(results)
    title = "Targets of issue 17 (ratios of this run's medians):"
    if markdown:
        lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(r) + " |" for r in table]
        return "\n".join([title, ""] + lines + [""] * bool(caveats)
                         + [f"- Caveat: {c}" for c in caveats])
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(HEADERS)]
    fmt = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()  # noqa: E731
    return "\n".join([title, "  " + fmt(HEADERS)] + ["  " + fmt(r) for r in table]
                     + [f"  Caveat: {c}" for c in caveats])
