"""Anomaly detection: the first NaN or infinity produced in backward raises, naming its op."""

import traceback

import numpy as np


def capture_trace():
    """Where the user's code recorded the op (the frames outside fastgrad)."""
    frames = traceback.extract_stack()[:-1]
    return [f for f in frames if "/fastgrad/" not in f.filename.replace("\\", "/")] or frames


def report(node, grads):
    """Raise ``FloatingPointError`` if a gradient that ``node``'s rule produced is not finite."""
    for i, g in enumerate(grads):
        if g is None:
            continue
        data = np.asarray(g)    # a gradient: a NumPy or a fastgrad array
        if data.dtype.kind in "fc" and not np.isfinite(data).all():
            where = ""
            if node.forward_trace:
                where = "\nThe forward op was recorded at:\n" + "".join(
                    traceback.format_list(node.forward_trace[-5:]))
            bad = "NaN" if np.isnan(data).any() else "infinity"
            raise FloatingPointError(
                "detect_anomaly: the backward rule of fastgrad.%s produced %s in the gradient "
                "of its argument %d (node #%d).%s" % (node.name, bad, i, node.seq, where))
