"""The derivative table, its sections, the rule helpers, the bindings and the registry that
compiles it (Note [Layers] in fastgrad/_layers.py)."""
