# The fused ufuncs of _fused.pyx (Note [Fused kernels]) are Python objects: the module has no
# C-level interface for other modules; this file exists so that every compiled module comes
# as .pyx, .pxd and .pyi (STYLE.md).
