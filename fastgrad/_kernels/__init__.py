"""Forward kernels: NumPy kernels NumPy lacks, the thread pool and its split operators, filled
gradients (Note [Layers] in fastgrad/_layers.py)."""
