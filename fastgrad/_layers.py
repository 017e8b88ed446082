"""The layers of fastgrad: which module may import which (Note [Layers]).

Note [Layers]
~~~~~~~~~~~~~
The modules of ``fastgrad/`` form layers, listed below from the bottom up. A module imports
only modules of its own layer or of layers below it, never above, and the imports inside one
layer form no cycle; imports inside functions count like any other, so a lazy import cannot
hide a cycle. ``tests/test_layers.py`` reads every module's imports (the syntax tree of a
``.py`` file, the ``import``/``cimport`` lines of a ``.pyx``/``.pxd``) and fails on a cycle
or an import that goes up.

Where a lower layer needs something that an upper layer defines, the dependency is inverted:
the lower module declares a table (a ``register_*`` function and the variable it fills) and
the upper module registers what it defines into it, once, at its own import, on its last
lines. The array type's operators need the table's primitives: ``fastgrad._registry`` calls
``_array.register_primitives`` and ``_engine.register_primitives`` once it has built them.
Its methods delegate to the NumPy-style functions: ``fastgrad._functions`` calls
``_array.register_functions``. ``fastgrad/__init__.py`` only imports; it connects nothing.
Every registration runs when ``import fastgrad`` does, because importing any submodule runs
the package first. The registrations are listed in ``REGISTRATIONS`` and the test checks
that each happens in the module that defines the thing and nowhere else.

A module not listed here fails the test: a new module takes its place in a layer.
"""

# (layer name, what it holds, its modules: a name ending in ".*" means a whole subpackage)
LAYERS = (
    ("state", "version, errors, devices, per-thread state, tape nodes, symbolic zeros",
     ["_version", "_source_tree", "base", "context", "device", "_state", "_node", "_zeros",
      "_complex", "_anomaly", "_reshape_codes"]),
    ("kernels", "NumPy kernels, the thread pool and its split operators, filled gradients",
     ["_parallel", "parallel.*", "_filled", "_kernels", "_memo"]),
    ("array", "the array type and the recording path (Primitive.apply), the backward core",
     ["_array", "_engine", "_function"]),
    ("table", "the derivative table, its rule helpers, the registry that compiles it",
     ["_table_complex", "_table_fft", "_table_linalg", "_table_special", "_derivatives",
      "_rules", "_registry", "_docs", "_namespaces"]),
    ("functions", "NumPy-signature functions over the primitives, NumPy dispatch, files",
     ["_construction", "_functions", "_fft", "_numpy_more", "_npx_more", "_rnn",
      "_mxnet_slicing", "_update_ops", "_io", "_params_format", "_dispatch"]),
    ("namespaces", "the public namespaces np, npx, nd, random, scipy",
     ["numpy", "numpy.*", "numpy_extension", "ndarray", "ndarray.*", "random", "scipy",
      "scipy.*"]),
    ("autograd", "the autograd API: record, backward, grad, Function, functional transforms",
     ["_derivative_tools", "functional", "autograd"]),
    ("symbol", "symbolic graphs, their JSON formats and the compiled executor",
     ["symbol", "symbol.*", "_plan", "executor", "visualization"]),
    ("tools", "optimizers, key-value stores, the launcher, stubs, the package itself",
     ["optimizer", "optimizer.*", "kvstore", "kvstore.*", "launch", "demo", "_layers",
      "_stubgen", ""]),
)

# (lower module, its register function, the one module that calls it)
REGISTRATIONS = (
    ("_filled", "register_array_type", "_array"),
    ("_array", "register_primitives", "_registry"),
    ("_engine", "register_primitives", "_registry"),
    ("_registry", "register_graph_functions", "_functions"),
    ("_array", "register_functions", "_functions"),
    ("_array", "register_numpy_functions", "_dispatch"),
    ("_array", "register_describer", "_docs"),
    ("_array", "register_legacy_array", "ndarray"),
    ("_array", "register_backward", "autograd"),
    ("autograd", "register_symbol_builder", "symbol._history"),
    ("symbol._graph", "register_json", "symbol._json"),
    ("symbol._graph", "register_mxnet_translation", "symbol._mxnet_json"),
    ("symbol._graph", "register_op_builder", "symbol._api"),
    ("symbol._graph", "register_executor", "executor"),
)


def layer_of(module):
    """The index in ``LAYERS`` of ``module`` (a name relative to ``fastgrad``, ``""`` for the
    package itself), or ``None`` if it is not listed."""
    for index, (_, _, members) in enumerate(LAYERS):
        for member in members:
            if module == member or (member.endswith(".*") and
                                    module.startswith(member[:-1])):
                return index
    return None
