"""collections.namedtuple's class, made without compiling its `__new__` until it is called.

Issue 27: namedtuple compiles (`eval`) a `__new__` for every class it makes, half of its
~80 us; the state's 16 row types (records.NamedTuple) paid ~1 ms of a due tick's imports
for it, and most are never built through `__new__` (rows come from `_make` or tuple.__new__).
Here `__new__` is a stand-in that compiles the same lambda on its first call and puts it in
its place; everything else is namedtuple's own: the same namespace, methods, docs, field
properties (collections._tuplegetter), `__match_args__` and module. records.NamedTuple makes
its classes here.
"""

from __future__ import annotations

import sys
from collections import _tuplegetter  # type: ignore[attr-defined]  (namedtuple's own)
from keyword import iskeyword


def named_tuple(typename: str, field_names: list[str], *, defaults: list | None = None,
                module: str | None = None) -> type:
    """collections.namedtuple(typename, field_names, defaults=, module=) (no `rename`)."""
    field_names = list(map(str, field_names))
    typename = sys.intern(str(typename))
    for name in [typename, *field_names]:
        if not name.isidentifier():
            raise ValueError(f"Type names and field names must be valid identifiers: {name!r}")
        if iskeyword(name):
            raise ValueError(f"Type names and field names cannot be a keyword: {name!r}")
    seen: set[str] = set()
    for name in field_names:
        if name.startswith("_"):
            raise ValueError(f"Field names cannot start with an underscore: {name!r}")
        if name in seen:
            raise ValueError(f"Encountered duplicate field name: {name!r}")
        seen.add(name)
    field_defaults = {}
    if defaults is not None:
        defaults = tuple(defaults)
        if len(defaults) > len(field_names):
            raise TypeError("Got more default values than field names")
        field_defaults = dict(reversed(list(zip(reversed(field_names), reversed(defaults),
                                                strict=False))))
    fields = tuple(map(sys.intern, field_names))
    num_fields = len(fields)
    arg_list = ", ".join(fields) + ("," if num_fields == 1 else "")
    repr_fmt = "(" + ", ".join(f"{name}=%r" for name in fields) + ")"
    tuple_new = tuple.__new__
    cls: type | None = None

    def __new__(_cls, *args, **kwargs):  # noqa: N807  (the stand-in, see the docstring)
        real = cls.__dict__["__new__"].__func__  # type: ignore[union-attr]  (a staticmethod)
        if real is __new__:
            real = eval(f"lambda _cls, {arg_list}: _tuple_new(_cls, ({arg_list}))",  # noqa: S307
                        {"_tuple_new": tuple_new, "__builtins__": {},
                         "__name__": f"namedtuple_{typename}"})
            real.__name__, real.__doc__ = "__new__", __new__.__doc__
            real.__qualname__ = f"{typename}.__new__"
            real.__defaults__ = defaults
            type.__setattr__(cls, "__new__", staticmethod(real))  # as type() wraps it
        return real(_cls, *args, **kwargs)

    __new__.__doc__ = f"Create new instance of {typename}({arg_list})"

    @classmethod  # type: ignore[misc]
    def _make(cls, iterable):
        result = tuple_new(cls, iterable)
        if len(result) != num_fields:
            raise TypeError(f"Expected {num_fields} arguments, got {len(result)}")
        return result

    _make.__func__.__doc__ = f"Make a new {typename} object from a sequence or iterable"

    def _replace(self, /, **kwds):
        result = self._make(map(kwds.pop, fields, self))
        if kwds:
            raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
        return result

    _replace.__doc__ = f"Return a new {typename} object replacing specified fields with new values"

    def __repr__(self):
        "Return a nicely formatted representation string"
        return self.__class__.__name__ + repr_fmt % self

    def _asdict(self):
        "Return a new dict which maps field names to their values."
        return dict(zip(self._fields, self, strict=False))

    def __getnewargs__(self):
        "Return self as a plain tuple.  Used by copy and pickle."
        return tuple(self)

    for method in (__new__, _make.__func__, _replace, __repr__, _asdict, __getnewargs__):
        method.__qualname__ = f"{typename}.{method.__name__}"
    namespace = {
        "__doc__": f"{typename}({arg_list})", "__slots__": (), "_fields": fields,
        "_field_defaults": field_defaults, "__new__": __new__, "_make": _make,
        "_replace": _replace, "__repr__": __repr__, "_asdict": _asdict,
        "__getnewargs__": __getnewargs__, "__match_args__": fields,
    }
    for index, name in enumerate(fields):
        namespace[name] = _tuplegetter(index, sys.intern(f"Alias for field number {index}"))
    cls = type(typename, (tuple,), namespace)
    if module is not None:
        cls.__module__ = module
    return cls
