"""The NumPy-signature functions over the table's primitives that fastgrad.numpy,
numpy_extension and ndarray export (Note [Layers] in fastgrad/_layers.py)."""
