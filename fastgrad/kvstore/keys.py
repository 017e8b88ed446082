"""Parsing KVStore arguments: one key or a list of keys, each with one value or a list of
values (one per device), as MXNet's ``kv.push(keys, values)`` accepts them."""

import numpy as _onp

from fastgrad._core._array import ndarray, unwrap

__all__ = ["pairs", "key_name"]


def key_name(key):
    return repr(key)


def _check_key(method, key):
    if isinstance(key, bool) or not isinstance(key, (int, str, _onp.integer)):
        raise TypeError("kvstore.%s: a key must be an int or a str, got %r" % (method, key))
    return int(key) if isinstance(key, _onp.integer) else key


def _values(method, key, value):
    """The list of arrays given for one key (several: one per device)."""
    if isinstance(value, ndarray):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, ndarray) for v in value):
        return list(value)
    raise TypeError("kvstore.%s: the value of key %s must be a fastgrad array or a non-empty "
                    "list of them, got %s" % (method, key_name(key), type(value).__name__))


def pairs(method, key, value, allow_none=False):
    """``[(key, [arrays])]`` from MXNet's forms: ``key, array``, ``key, [arrays]``,
    ``[keys], [arrays]`` or ``[keys], [[arrays], ...]``."""
    if isinstance(key, (list, tuple)):
        keys = [_check_key(method, k) for k in key]
        if len(set(keys)) != len(keys):
            raise ValueError("kvstore.%s: a key appears twice in %r" % (method, list(key)))
        if allow_none and value is None:
            return [(k, None) for k in keys]
        if not isinstance(value, (list, tuple)) or len(value) != len(keys):
            raise ValueError("kvstore.%s: %d keys need a list of %d values, got %s"
                             % (method, len(keys), len(keys),
                                "%d" % len(value) if isinstance(value, (list, tuple))
                                else type(value).__name__))
        return [(k, _values(method, k, v)) for k, v in zip(keys, value)]
    key = _check_key(method, key)
    if allow_none and value is None:
        return [(key, None)]
    return [(key, _values(method, key, value))]


def check_like(method, key, stored, arrays, what):
    """Every array in ``arrays`` has ``stored``'s shape and dtype, or an error naming the key."""
    for a in arrays:
        data = unwrap(a)
        if data.shape != stored.shape or data.dtype != stored.dtype:
            raise ValueError("kvstore.%s: key %s holds shape %s dtype %s, but the %s has shape %s "
                             "dtype %s" % (method, key_name(key), stored.shape, stored.dtype,
                                           what, data.shape, data.dtype))
