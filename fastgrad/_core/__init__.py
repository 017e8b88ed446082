"""The Cython tape runtime: per-thread state, tape nodes, the array type and its recording
path, the backward engine (Note [Layers] in fastgrad/_layers.py)."""
