"""Fused groups of elementwise steps in an executor's plan (internal).

Note [Fused groups]
~~~~~~~~~~~~~~~~~~~
A run of consecutive plan steps whose ops are elementwise ufuncs (``FUSIBLE``) is a *group*.
When every array it reads from outside has one shape, is C-contiguous, real floating and
large (``MIN_SIZE`` elements; a 0-d value that takes no gradient may stand beside them), the
plan hands the whole run to the group (``Plan.forward`` and ``Plan._replay`` have one hook
each), which evaluates it block by block along the flattened arrays, ``BLOCK`` elements at a
time, so that a value made in one step is read by the next while it is in cache:

* forward stores into full arrays only the values that something needs after the group: a
  step outside it or an output (its *results*), and the values the group's own derivative
  rules read (its *saved* values). Every other value lives for one block;
* backward replays the group's linked steps, block by block, in the replay's order (reverse
  creation order), with the same rules, each on the block of its gradient and of its saved
  values, accumulating each slot's gradient in the replay's order (the gradient already there
  from the steps after the group first, then the group's terms in turn). The gradients of the
  slots the group reads from outside are written into new full arrays the replay then owns.

An elementwise ufunc gives each element the same value whatever block it is computed in, and
the terms of each element's gradient are the same, summed in the same order, so a fused
group's values and gradients equal the unfused plan's (and the tape's) bit for bit; no sum
is reordered (reductions are never fused). Anything else (a small array, broadcasting between
the group's inputs, a strided or complex input, anomaly mode) runs the steps one by one, as
without fusion; the decision is taken at each forward and remembered for its backward.
"""

import numpy as np

from fastgrad._filled import Filled

# The ops a group may hold: a ufunc forward and derivative formulas that are elementwise
# in the inputs, the result and ``g`` (Note [Fused groups]).
FUSIBLE = frozenset([
    "add", "subtract", "multiply", "divide", "negative", "positive", "maximum", "minimum",
    "exp", "expm1", "log", "log1p", "sqrt", "square", "reciprocal", "abs",
    "sin", "cos", "tan", "sinh", "cosh", "tanh",
])

BLOCK = 1 << 14         # elements per block: a block's few values stay in the L2 cache
MIN_SIZE = 1 << 18      # fuse only arrays of this many elements or more
_FLOATS = frozenset([np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)])


class StepInfo:
    """What a group needs of one plan step (the plan's ``Step`` keeps it in C fields)."""

    __slots__ = ("index", "op", "kernel", "ins", "out", "params", "linked", "rule", "needs",
                 "gslots", "saved", "save_result")

    def __init__(self, index, op, kernel, ins, out, params, linked, rule, needs, gslots, saved,
                 save_result):
        self.index = index
        self.op = op
        self.kernel = kernel
        self.ins = ins
        self.out = out
        self.params = params
        self.linked = linked
        self.rule = rule
        self.needs = needs
        self.gslots = gslots
        self.saved = saved
        self.save_result = save_result


def fusible(op, kernel, n_out, has_shape_slots):
    """Whether a plan step may join a group."""
    return (op in FUSIBLE and n_out == 1 and isinstance(kernel, np.ufunc)
            and not has_shape_slots)


def plan_groups(infos, read_after):
    """The groups of a plan: maximal runs of at least two consecutive fusible steps.

    Parameters
    ----------
    infos : list of StepInfo or None
        Per plan step, in order: its description if it is fusible, else None.
    read_after : callable
        ``read_after(slot, index)``: whether a step after ``index`` or an output of the plan
        reads ``slot``.
    """
    groups = []
    run = []
    for info in infos + [None]:
        if info is not None and (not run or info.index == run[-1].index + 1):
            run.append(info)
            continue
        if len(run) >= 2:
            groups.append(FusedGroup(run, read_after))
        run = [info] if info is not None else []
    return groups


def _flat(a):
    """``a`` as a 1-d array over its elements in C order, without a copy where possible."""
    if type(a) is Filled:
        return a
    if a.flags.c_contiguous:
        return a.reshape(-1)
    if not any(a.strides):
        return np.lib.stride_tricks.as_strided(a, (a.size,), (0,))
    return np.ascontiguousarray(a).reshape(-1)


def _block(a, lo, hi):
    if type(a) is Filled:
        return Filled(a.value, (hi - lo,))
    return a[lo:hi]


class FusedGroup:
    """A run of elementwise steps evaluated block by block (Note [Fused groups])."""

    def __init__(self, run, read_after):
        self.steps = run
        self.first = run[0].index
        self.last = run[-1].index
        made = set([st.out for st in run])
        self.inputs = []                  # slots read from outside, in first-use order
        for st in run:
            for s in st.ins:
                if s not in made and s not in self.inputs:
                    self.inputs.append(s)
        self.results = [s for s in sorted(made) if read_after(s, self.last)]
        saved = set()
        for st in run:
            if st.linked:
                saved.update(st.saved)
                if st.save_result:
                    saved.add(st.out)
        self.stored = sorted((set(self.results) | saved) & made)
        self.linked = [st for st in reversed(run) if st.linked]
        self.gin = sorted(set([s for st in run for s in st.gslots if s >= 0]) - made)
        self.fused = False                # the last forward ran fused
        self.replayable = False           # the plan's replay calls backward (else: unfused
                                          #   whenever a step is linked)
        self.shape = None
        self.dtypes = {}                  # per slot the group makes: its dtype (last forward)

    def forward(self, vals, allowed=True):
        """Run the group on ``vals`` if ``allowed`` and it may be fused; whether it was."""
        self.fused = False
        if not allowed or (self.linked and not self.replayable):
            return False
        shape = None
        for s in self.inputs:
            v = vals[s]
            if type(v) is not np.ndarray or v.dtype not in _FLOATS:
                return False
            if v.ndim:
                if shape is None:
                    shape = v.shape
                elif v.shape != shape:
                    return False
                if not v.flags.c_contiguous:
                    return False
            elif s in self.gin:
                return False
        if shape is None or np.prod(shape) < MIN_SIZE:
            return False
        size = int(np.prod(shape))
        flat = {s: (vals[s].reshape(-1) if vals[s].ndim else vals[s]) for s in self.inputs}
        full = None
        for lo in range(0, size, BLOCK):
            hi = min(lo + BLOCK, size)
            loc = {s: (v[lo:hi] if v.ndim else v) for s, v in flat.items()}
            for st in self.steps:
                loc[st.out] = st.kernel(*[loc[s] for s in st.ins], *st.params)
            if full is None:
                if any([np.shape(loc[st.out]) != (hi - lo,) for st in self.steps]):
                    return False          # a step of 0-d values alone: run unfused
                self.dtypes = {st.out: loc[st.out].dtype for st in self.steps}
                full = {s: np.empty(size, self.dtypes[s]) for s in self.stored}
            for s in self.stored:
                full[s][lo:hi] = loc[s]
        for s in self.stored:
            vals[s] = full[s].reshape(shape)
        self.shape = shape
        self.fused = True
        return True

    def backward(self, vals, accs):
        """Replay the group's linked steps block by block (Note [Fused groups]).

        ``accs``: the replay's gradient per slot. Returns ``(slot, gradient)`` for each slot
        the group reads from outside and gave a gradient to; the group's own slots' gradients
        are used up."""
        size = int(np.prod(self.shape))
        stored = {s: vals[s].reshape(-1) for s in self.stored}
        ext = {s: vals[s] for s in self.inputs}
        seeds = {}
        for st in self.steps:
            if accs[st.out] is not None:
                seeds[st.out] = _flat(accs[st.out])
        for s in self.gin:
            if accs[s] is not None:
                seeds[s] = _flat(accs[s])
        out = {}
        for lo in range(0, size, BLOCK):
            hi = min(lo + BLOCK, size)
            n = hi - lo
            gacc = {s: _block(g, lo, hi) for s, g in seeds.items()}
            for st in self.linked:
                g = gacc.pop(st.out, None)
                if g is None:
                    continue
                args = [g, st.needs]
                for s in st.saved:
                    args.append(stored[s][lo:hi] if s in stored else
                                (ext[s].reshape(-1)[lo:hi] if ext[s].ndim else ext[s]))
                if st.save_result:
                    args.append(stored[st.out][lo:hi])
                args.extend(st.params)
                grads = st.rule(*args)
                g = None
                for i, s in enumerate(st.gslots):
                    if s < 0 or grads[i] is None:
                        continue
                    gi = self._fit(grads[i], s, ext, n)
                    prev = gacc.get(s)
                    gacc[s] = gi if prev is None else prev + gi
            for s in self.gin:
                gs = gacc.get(s)
                if gs is None:
                    continue
                if s not in out:
                    out[s] = np.empty(size, ext[s].dtype)
                out[s][lo:hi] = gs
        return [(s, g.reshape(self.shape)) for s, g in out.items()]

    def _fit(self, gi, s, ext, n):
        """``gi`` in the block's shape and its slot's dtype (what ``fit_gradient_like`` does
        for a gradient of an elementwise step)."""
        dtype = ext[s].dtype if s in ext else self.dtypes[s]
        if type(gi) is Filled:
            if gi.shape == (n,) and gi.value.dtype == dtype:
                return gi
            gi = gi.view()
        gi = np.asarray(gi)
        if gi.shape != (n,):
            gi = np.broadcast_to(gi, (n,))
        if gi.dtype != dtype:
            gi = gi.astype(dtype)
        return gi
