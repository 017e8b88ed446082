"""Registries of named classes (``mx.registry``): initializers and metrics by name.

MXNet keeps one table per base class (``mx.init.Initializer``, ``mx.metric.EvalMetric``); a
subclass is registered under its lower-cased class name and any aliases, and ``create`` builds
an instance from a name, an instance (returned as is), a dict of constructor arguments, or a
JSON string: ``'["normal", {"sigma": 0.5}]'`` (what ``Initializer.dumps()`` writes) or
``'{"initializer": "normal", "sigma": 0.5}'``.

>>> import fastgrad as mx
>>> mx.init.create('xavier', magnitude=2).dumps()
'["xavier", {"rnd_type": "uniform", "factor_type": "avg", "magnitude": 2}]'
"""

import json
import warnings

__all__ = ["get_registry", "get_register_func", "get_alias_func", "get_create_func"]

# {base class: {lower-case name: class}}
_REGISTRY = {}


def _table(base_class):
    return _REGISTRY.setdefault(base_class, {})


def get_registry(base_class):
    """A copy of the ``{name: class}`` table of ``base_class``."""
    return dict(_table(base_class))


def get_register_func(base_class, nickname):
    """A decorator ``register(klass, name=None)`` that files ``klass`` (a subclass of
    ``base_class``) under ``name`` or its lower-cased class name. Registering a name twice
    warns and keeps the newer class, as MXNet does."""
    table = _table(base_class)

    def register(klass, name=None):
        if not (isinstance(klass, type) and issubclass(klass, base_class)):
            raise TypeError("%s.register: can only register a subclass of %s, not %r"
                            % (nickname, base_class.__name__, klass))
        key = (klass.__name__ if name is None else name).lower()
        previous = table.get(key)
        if previous is not None and previous is not klass:
            warnings.warn("New %s %s.%s registered with name %s is overriding existing %s %s.%s"
                          % (nickname, klass.__module__, klass.__name__, key, nickname,
                             previous.__module__, previous.__name__), UserWarning, stacklevel=2)
        table[key] = klass
        return klass

    register.__doc__ = "Register a %s class under its lower-cased name." % nickname
    return register


def get_alias_func(base_class, nickname):
    """A decorator factory ``alias(*names)`` registering a class under extra names."""
    register = get_register_func(base_class, nickname)

    def alias(*aliases):
        def decorate(klass):
            for name in aliases:
                register(klass, name)
            return klass
        return decorate
    return alias


def get_create_func(base_class, nickname):
    """A function ``create(name_or_instance, *args, **kwargs)`` building a registered class.

    The name may also be given as the keyword ``nickname`` (``create(initializer='zero')``),
    as a dict of keyword arguments holding it, or as a JSON string (see the module doc)."""
    table = _table(base_class)

    def create(*args, **kwargs):
        if args:
            spec, args = args[0], args[1:]
        elif nickname in kwargs:
            spec = kwargs.pop(nickname)
        else:
            raise TypeError("%s.create: give the %s to create (a name or an instance)"
                            % (nickname, nickname))
        if isinstance(spec, base_class):
            if args or kwargs:
                raise ValueError("%s is already an instance. Additional arguments are invalid"
                                 % nickname)
            return spec
        if isinstance(spec, dict):
            return create(**spec)
        if not isinstance(spec, str):
            raise TypeError("%s must be of string type, not %s" % (nickname, type(spec).__name__))
        if spec.startswith(("[", "{")):
            if args or kwargs:
                raise ValueError("%s.create: a JSON description takes no further arguments"
                                 % nickname)
            loaded = json.loads(spec)
            if isinstance(loaded, list):
                name, loaded_kwargs = loaded
                return create(name, **loaded_kwargs)
            return create(**loaded)
        key = spec.lower()
        if key not in table:
            raise ValueError("%s is not registered. Please register with %s.register first"
                             % (key, nickname))
        return table[key](*args, **kwargs)

    create.__doc__ = ("Create a %s from its registered name (extra arguments go to its "
                      "constructor), return an instance as is, or read a JSON description."
                      % nickname)
    return create
