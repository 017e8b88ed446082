"""What the public autograd and functional modules build on (Note [Layers] in
fastgrad/_layers.py)."""
