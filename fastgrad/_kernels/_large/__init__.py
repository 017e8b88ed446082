"""Kernels for large arrays: NumPy's own work, split across the cores (internal).

Note [Large-array kernels]
~~~~~~~~~~~~~~~~~~~~~~~~~~
The rest of fastgrad calls NumPy. On a large array, a few of those calls may instead go to
this subpackage, which does the same work on several cores and gives NumPy's result bit for
bit (or declines, and the caller calls NumPy). Its whole interface is small:

* for Cython callers, ``kernels.pxd``: ``elementwise(ufunc, args)`` (``Primitive.apply`` for
  ops whose kernel is a ufunc), ``add_into(acc, g)`` and ``add(a, b)`` (the engine's gradient
  accumulation), ``sum_rows(x, nlead)`` (the engine's sum over broadcast leading axes, Note
  [Row sums]), and ``large_rule(g)``/``large_rule_size()`` (the engine's choice of a rule's
  large binding, Note [Bindings] in ``_bindings.py``);
* for Python callers, this module: ``apply(ufunc, *args)`` (relu's kernel, and ``Filled``'s
  ufunc calls with the value alone), ``sum_all(x)``
  (full sums), ``cast_mask(mask, dtype)`` (a boolean mask as 0/1 floats, for
  ``Filled``), the operators ``op_add``..., ``Split`` and the rule scope ``rule_begin``/
  ``rule_end`` of the large binding (Note [Owned temporaries] in ``kernels.pyx``), and the
  settings below.

How the work is split, why the results are bit-identical, and what may fall back is Note
[Parallel kernels] in ``kernels.pyx``; the C thread pool and the buffer cache are Notes
[Kernel pool] and [Buffer cache] in ``pool.h``. What it costs in risk (NumPy's private loop
API, fork, platforms never built here) is ``docs/internals/parallel.rst``.

Settings: ``set_num_threads(n)`` (``FASTGRAD_NUM_THREADS``; ``1`` turns every kernel here
off, and the callers then call NumPy; users call ``fastgrad.set_num_threads``, which also sets
the BLAS's threads, Note [Threads on a busy machine] in ``_threads.py``), ``disable(names)``
(switch single kernels off, named in ``KERNELS``, to measure what each brings),
``set_min_size(n)``, ``set_cache_limit(bytes)``, ``clear_cache()``; ``cached_empty(shape,
dtype)`` makes a scratch array from the buffer cache; ``pool_calls()`` counts the calls the C
pool ran (for tests).
"""

from fastgrad._kernels._large.kernels import (KERNELS, Split, apply, cached_bytes, cached_empty,
                                              cast_mask, clear_cache, disable, get_min_size,
                                              get_num_threads, op_add, op_div, op_eq, op_ge,
                                              op_gt, op_le, op_lt, op_mul, op_ne, op_neg, op_sub,
                                              pool_calls, rule_begin, rule_end, set_cache_limit,
                                              set_min_size, set_num_threads, sum_all, sum_rows)

__all__ = ["KERNELS", "Split", "apply", "cached_bytes", "cached_empty", "cast_mask", "clear_cache",
           "disable", "get_min_size", "get_num_threads", "op_add", "op_div", "op_eq", "op_ge",
           "op_gt", "op_le", "op_lt", "op_mul", "op_ne", "op_neg", "op_sub", "pool_calls",
           "rule_begin", "rule_end", "set_cache_limit", "set_min_size", "set_num_threads",
           "sum_all", "sum_rows"]
