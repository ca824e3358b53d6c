"""What identifies a run, by content: hashes of functions, their closures and their data.

A checkpoint folder may only be resumed by the run that wrote it.  A function's *name* says
nothing about what it computes (two closures of one ``def`` share it), so
:func:`function_fingerprint` hashes what the function is made of:

- its code (``co_code``, constants, names; nested functions and lambdas recursively),
- its defaults and keyword defaults,
- the values in its closure cells and the module globals its code reads (functions
  recursively, numbers, strings, bytes, numpy arrays and scalars by their bytes, containers of
  these, modules and classes by their qualified name),
- for a bound method its instance, for a ``functools.partial`` its arguments, for a callable
  object (or an arviz ``SamplingWrapper``) its class's methods and its attributes; a numpy
  random generator by its state; locks and loggers by their type (no data).

A value whose content cannot be hashed reliably (an open file, a C extension object, a
random generator, a pandas frame, ...) raises :class:`UnhashableError` naming it: the caller
then passes an explicit ``key=`` that names the run instead.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import pathlib
import threading
import types

import numpy as np

__all__ = ["UnhashableError", "function_fingerprint"]

#: Py_TPFLAGS_HEAPTYPE: classes defined by Python code (not C extension types)
_HEAPTYPE = 1 << 9


#: values that carry no data a function's result depends on (hashed by their type)
_NO_CONTENT = (type(threading.Lock()), type(threading.RLock()), logging.Logger,
               logging.LoggerAdapter, logging.Handler)


class UnhashableError(ValueError):
    """A value whose content cannot be hashed reliably; ``what`` says where it was found."""


def _is_python_class(cls: type) -> bool:
    return all(c is object or (c.__flags__ & _HEAPTYPE and "__slots__" not in vars(c))
               for c in cls.__mro__)


class _Hasher:
    def __init__(self):
        self.h = hashlib.sha256()
        self.active: set[int] = set()  # objects being hashed (cycles are hashed by reference)

    def put(self, tag: str, payload: bytes = b"") -> None:
        self.h.update(tag.encode() + b":" + str(len(payload)).encode() + b":" + payload)

    def value(self, obj, where: str) -> None:  # noqa: C901 - one branch per kind of value
        if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
            self.put(type(obj).__name__, repr(obj).encode())
            return
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                self.put("ndarray-object", repr(obj.shape).encode())
                for k, v in enumerate(obj.reshape(-1).tolist()):
                    self.value(v, f"{where}[{k}]")
                return
            self.put("ndarray", f"{obj.dtype.str}{obj.shape}".encode())
            self.put("bytes", np.ascontiguousarray(obj).tobytes())
            return
        if isinstance(obj, np.generic):
            self.put("npscalar", obj.dtype.str.encode() + np.asarray(obj).tobytes())
            return
        if isinstance(obj, pathlib.PurePath):
            self.put("path", str(obj).encode())
            return
        if isinstance(obj, types.ModuleType):
            self.put("module", obj.__name__.encode())
            return
        if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            owner = getattr(obj, "__self__", None)
            if owner is not None and not isinstance(owner, types.ModuleType):
                raise UnhashableError(f"{where} is a method of a {type(owner).__name__} object")
            self.put("builtin", f"{obj.__module__}.{obj.__qualname__}".encode())
            return
        if isinstance(obj, _NO_CONTENT):  # locks, loggers: nothing that changes a result
            self.put("no-content", type(obj).__qualname__.encode())
            return
        if isinstance(obj, np.random.Generator):
            self.put("generator")
            self.value(obj.bit_generator.state, f"{where} state")
            return
        if isinstance(obj, np.random.RandomState):
            self.put("randomstate")
            self.value(obj.get_state(legacy=False), f"{where} state")
            return
        if id(obj) in self.active:  # a cycle: the object is already being hashed
            self.put("cycle", type(obj).__qualname__.encode())
            return
        self.active.add(id(obj))
        try:
            self._composite(obj, where)
        finally:
            self.active.discard(id(obj))

    def _composite(self, obj, where: str) -> None:
        if isinstance(obj, (tuple, list)):
            self.put(type(obj).__name__, str(len(obj)).encode())
            for k, v in enumerate(obj):
                self.value(v, f"{where}[{k}]")
        elif isinstance(obj, (set, frozenset)):
            digests = sorted(_digest(v, f"{where} element") for v in obj)
            self.put("set", "".join(digests).encode())
        elif isinstance(obj, dict):
            self.put("dict", str(len(obj)).encode())
            for k, v in sorted(obj.items(), key=lambda kv: _digest(kv[0], f"{where} key")):
                self.value(k, f"{where} key")
                self.value(v, f"{where}[{k!r}]")
        elif isinstance(obj, types.FunctionType):
            self.function(obj, where)
        elif isinstance(obj, types.MethodType):
            self.put("method")
            self.value(obj.__func__, where)
            self.value(obj.__self__, f"{where}.__self__")
        elif isinstance(obj, functools.partial):
            self.put("partial")
            self.value(obj.func, f"{where}.func")
            self.value(obj.args, f"{where}.args")
            self.value(obj.keywords, f"{where}.keywords")
        elif isinstance(obj, types.CodeType):
            self.code(obj, where)
        elif isinstance(obj, type):
            self.put("class", f"{obj.__module__}.{obj.__qualname__}".encode())
            if _is_python_class(obj) and obj.__module__ != "builtins":
                for name, member in sorted(vars(obj).items()):
                    if isinstance(member, (types.FunctionType, staticmethod, classmethod,
                                           property)):
                        fn = getattr(member, "__func__", getattr(member, "fget", member))
                        if isinstance(fn, types.FunctionType):
                            self.put("member", name.encode())
                            self.function(fn, f"{obj.__qualname__}.{name}")
        elif _is_python_class(type(obj)) and hasattr(obj, "__dict__"):
            self.put("instance")
            for cls in type(obj).__mro__[:-1]:
                self.value(cls, f"{where} class")
            self.value(dict(vars(obj)), f"{where}.__dict__")
        else:
            raise UnhashableError(f"{where} is a {type(obj).__module__}."
                                  f"{type(obj).__qualname__} object")

    def code(self, co: types.CodeType, where: str) -> None:
        self.put("code", co.co_code)
        self.put("names", repr((co.co_names, co.co_varnames, co.co_freevars)).encode())
        for k, const in enumerate(co.co_consts):
            if isinstance(const, types.CodeType):
                self.code(const, f"{where}/{const.co_name}")
            else:
                self.value(const, f"{where} constant {k}")

    def function(self, fn: types.FunctionType, where: str) -> None:
        label = f"{getattr(fn, '__module__', '?')}.{fn.__qualname__}"
        where = label if where == "refit_fn" else f"{where} ({label})"
        self.put("function", fn.__qualname__.encode())
        self.code(fn.__code__, where)
        self.value(fn.__defaults__, f"{where} defaults")
        self.value(fn.__kwdefaults__, f"{where} keyword defaults")
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell (a name assigned later)
                self.put("empty-cell", name.encode())
                continue
            self.value(content, f"{where}: closure variable {name!r}")
        globals_ = fn.__globals__
        builtins_ = globals_.get("__builtins__", {})
        for name in sorted(_global_names(fn.__code__)):
            if name in globals_:
                self.put("global", name.encode())
                self.value(globals_[name], f"{where}: global {name!r}")
            elif name not in (builtins_ if isinstance(builtins_, dict) else vars(builtins_)):
                self.put("unbound-global", name.encode())

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def _global_names(co: types.CodeType) -> set[str]:
    """Names the code (and code nested in it) may read as globals or attributes."""
    names = set(co.co_names)
    for const in co.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _digest(obj, where: str) -> str:
    h = _Hasher()
    h.value(obj, where)
    return h.hexdigest()


def function_fingerprint(fn, key=None) -> str:
    """A hash of what ``fn`` computes: code, defaults, closure values, globals it reads.

    Parameters
    ----------
    fn : a function, lambda, bound method, ``functools.partial``, callable object or
        SamplingWrapper-like object.
    key : an explicit name of the run; when given it is used instead (nothing is hashed).

    Returns
    -------
    str
        64 hex digits; equal for functions that compute the same thing from the same values.

    Raises
    ------
    UnhashableError
        A value ``fn`` depends on cannot be hashed reliably; the message names it and asks for
        ``key=``.

    Examples
    --------
    >>> def make(mu):
    ...     return lambda i: mu + i
    >>> function_fingerprint(make(0.0)) == function_fingerprint(make(0.0))
    True
    >>> function_fingerprint(make(0.0)) == function_fingerprint(make(-5.0))
    False
    """
    if key is not None:
        if not isinstance(key, str) or not key:
            raise TypeError(f"key must be a non-empty string naming the run, got {key!r}")
        return hashlib.sha256(b"key:" + key.encode()).hexdigest()
    try:
        return _digest(fn, "refit_fn")
    except UnhashableError as err:
        raise UnhashableError(
            f"the checkpoint cannot tell runs of this refit_fn apart: {err}, whose content "
            "cannot be hashed reliably. Pass key='...' (a name that changes whenever the "
            "function, its data or its settings change) to identify the run"
        ) from None
    except RecursionError:
        raise UnhashableError(
            "the checkpoint cannot hash this refit_fn (its values nest too deeply); pass "
            "key='...' to identify the run") from None
