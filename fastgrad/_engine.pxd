# The backward pass.  See Note [Scheduling] and Note [Accumulation] in _engine.pyx.
