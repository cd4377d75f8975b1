"""Records: the part of the standard `dataclasses` this project uses, at a fraction of its cost.

Issue 27: `import dataclasses` loads inspect, ast and dis (~10 ms), and each `@dataclass` compiles
five or six generated methods one by one and asks inspect for a signature (~0.3 ms a class, ~64
classes on the tick path). Here `__init__`, `__eq__` and `__hash__` are compiled the way
dataclasses writes them, but each on its first call (most classes of a tick are never built or
compared), and `__init__` only at a class's ninth build: the first eight set the fields by a loop
(a compile costs ten builds). `__repr__` and the frozen guards are closures. Same semantics as
dataclasses for what is offered: `dataclass(frozen=, slots=, eq=)`, `field(default=,
default_factory=, init=, repr=)`, `fields`, `replace`, `asdict`, `is_dataclass`, `MISSING`,
`FrozenInstanceError`. Not offered: order, unsafe_hash, kw_only, InitVar, match_args=False, and
the signature-shaped `__doc__` dataclasses gives a class without a docstring. And `NamedTuple`,
typing's class statement for tuples with names, without its per-field annotation check.
Imports nothing beyond builtins and sys: this sits under every module of the tick.

`slots=True` builds a class twice (a class cannot gain slots once made: ~0.1 M instructions
a class), so it is for the records made per file, row or task (Task, Entry, TaskState,
Problem, RunResult...); one made once a tick or once a run (Config, TickReport, RunContext,
LadderOutcome...) is a plain record (issue 27: ~18 classes built once less before a task).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
_FIELDS = "__record_fields__"  # not dataclasses' name: its functions must not half-work on these
_SELF_NAMES = ("self", "__records_self__")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()  # a field's default / default_factory when it has none


class _HasFactory:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _HasFactory()  # the __init__ default of a field that has a default_factory


class FrozenInstanceError(AttributeError):
    """Assigning to or deleting a field of a frozen record."""


class Field:
    """One field: what `fields()` returns (dataclasses.Field's attributes that the code reads)."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr")

    def __init__(self, default: object, default_factory: object, init: bool, repr: bool):
        self.name: str = ""
        self.type: object = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr

    def __repr__(self) -> str:
        return (f"Field(name={self.name!r},type={self.type!r},default={self.default!r},"
                f"default_factory={self.default_factory!r},init={self.init!r},"
                f"repr={self.repr!r})")


def field(*, default=MISSING, default_factory=MISSING, init: bool = True, repr: bool = True):
    """A field with a default, a default_factory (called per instance), or outside __init__."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr)


def dataclass(cls=None, /, *, frozen: bool = False, slots: bool = False, eq: bool = True):
    """`@dataclass` or `@dataclass(frozen=True, slots=True, eq=False)`, as in dataclasses."""

    def wrap(cls: type) -> type:
        return _build(cls, frozen, slots, eq)

    return wrap if cls is None else wrap(cls)


# ------------------------------------------------------------------------------ the functions


def is_dataclass(obj: object) -> bool:
    cls = obj if isinstance(obj, type) else type(obj)
    return hasattr(cls, _FIELDS)


def fields(class_or_instance: object) -> tuple[Field, ...]:
    try:
        return tuple(getattr(class_or_instance, _FIELDS).values())
    except AttributeError:
        raise TypeError("must be called with a dataclass type or instance") from None


def replace(obj, /, **changes):
    """A copy of `obj` with `changes`; an unknown name is a TypeError, as in dataclasses."""
    if isinstance(obj, type) or not hasattr(obj, _FIELDS):
        raise TypeError("replace() should be called on dataclass instances")
    for f in getattr(obj, _FIELDS).values():
        if not f.init:
            if f.name in changes:
                raise ValueError(f"field {f.name} is declared with init=False, it cannot be "
                                 "specified with replace()")
            continue
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def asdict(obj, *, dict_factory=dict):
    """The record as a dict, recursing into records, lists, tuples and dicts (dataclasses')."""
    if isinstance(obj, type) or not hasattr(obj, _FIELDS):
        raise TypeError("asdict() should be called on dataclass instances")
    return _asdict(obj, dict_factory)


_ATOMIC = frozenset({type(None), bool, int, float, str, complex, bytes, type(...), range})


def _asdict(obj, dict_factory):
    cls = type(obj)
    if cls in _ATOMIC:  # what deepcopy would return as is (dataclasses does the same in 3.12)
        return obj
    if hasattr(cls, _FIELDS) and not isinstance(obj, type):
        return dict_factory([(f.name, _asdict(getattr(obj, f.name), dict_factory))
                             for f in getattr(cls, _FIELDS).values()])
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a NamedTuple keeps its type
        return cls(*[_asdict(v, dict_factory) for v in obj])
    if isinstance(obj, (list, tuple)):
        return cls(_asdict(v, dict_factory) for v in obj)
    if isinstance(obj, dict):
        return cls((_asdict(k, dict_factory), _asdict(v, dict_factory)) for k, v in obj.items())
    import copy  # lazy: only for a value that is neither a record, a container nor atomic

    return copy.deepcopy(obj)


# ------------------------------------------------------------------------------ building a class


def _build(cls: type, frozen: bool, slots: bool, eq: bool) -> type:
    all_fields = _collect_fields(cls)
    if slots:
        cls = _with_slots(cls, all_fields)
    setattr(cls, _FIELDS, all_fields)
    own = cls.__dict__
    init_fields = [f for f in all_fields.values() if f.init]
    if "__match_args__" not in own:
        cls.__match_args__ = tuple(f.name for f in init_fields)
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    wanted = ["__init__"] + ["__eq__"] * (eq and "__eq__" not in own)
    if eq and frozen and not explicit_hash:
        wanted.append("__hash__")
    for name in wanted:
        if name not in own:
            _install_lazy(cls, name, all_fields, frozen)
    if "__repr__" not in own:
        cls.__repr__ = _repr_of(cls, tuple(f.name for f in all_fields.values() if f.repr))
    if eq and not frozen and not explicit_hash:
        cls.__hash__ = None  # mutable and compared by value: unhashable (dataclasses' rule)
    if frozen:
        _add_frozen_guards(cls, all_fields, own)
        if slots and "__getstate__" not in own:  # pickle/copy of a frozen slots record
            cls.__getstate__ = _getstate
            cls.__setstate__ = _setstate
    return cls


def _collect_fields(cls: type) -> dict[str, Field]:
    """Fields of the record bases (MRO order), then the class's own annotations in order."""
    found: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        found.update(base.__dict__.get(_FIELDS, {}))
    for name, kind in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(kind):
            continue
        default = cls.__dict__.get(name, MISSING)
        if isinstance(default, Field):
            f = default
            if f.default is MISSING:
                delattr(cls, name)  # a factory or no default: nothing stays on the class
            else:
                setattr(cls, name, f.default)
        else:
            f = Field(default, MISSING, True, True)
        if f.default is not MISSING and f.default.__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not "
                             "allowed: use default_factory")
        f.name, f.type = name, kind
        found[name] = f
    seen_default = False
    for f in found.values():
        if not f.init:
            continue
        if f.default is MISSING and f.default_factory is MISSING:
            if seen_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
        else:
            seen_default = True
    return found


def _is_classvar(kind: object) -> bool:
    text = kind if isinstance(kind, str) else repr(kind)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _with_slots(cls: type, all_fields: dict[str, Field]) -> type:
    """A new class with __slots__ for the fields (a class cannot gain slots once made)."""
    inherited: set[str] = set()
    for base in cls.__mro__[1:-1]:
        names = base.__dict__.get("__slots__", ())
        inherited.update((names,) if isinstance(names, str) else names)
    body = dict(cls.__dict__)
    body["__slots__"] = tuple(name for name in all_fields if name not in inherited)
    for name in all_fields:
        body.pop(name, None)  # a class-level default would clash with the slot
    body.pop("__dict__", None)
    body.pop("__weakref__", None)
    new = type(cls)(cls.__name__, cls.__bases__, body)
    new.__qualname__ = cls.__qualname__
    return new


_INTERPRETED = 8  # builds of a record class by _binder's loop before its __init__ is compiled


def _install_lazy(cls: type, name: str, all_fields: dict[str, Field], frozen: bool) -> None:
    """A stand-in that compiles the real method on its first call and puts it in its place:
    a class never built nor compared in this process never pays the compile (~50 us each).
    `__init__` is compiled only at the class's _INTERPRETED+1-th build: the builds before it
    go through _binder (issue 27: most classes of a tick are built once or twice, and a
    compile costs ten times what such a build does)."""
    bind = _binder(cls, all_fields, frozen) if name == "__init__" else None
    left = [_INTERPRETED]

    def stand_in(self, *args, **kwargs):
        real = cls.__dict__[name]
        if real is stand_in:  # not yet replaced (another thread may just have done it)
            if bind is not None and left[0] > 0 and bind(self, args, kwargs):
                left[0] -= 1
                return None
            real = _compile(cls, name, all_fields, frozen)
            setattr(cls, name, real)
        return real(self, *args, **kwargs)

    stand_in.__name__, stand_in.__qualname__ = name, f"{cls.__qualname__}.{name}"
    setattr(cls, name, stand_in)


def _binder(cls: type, all_fields: dict[str, Field], frozen: bool):
    """What the compiled __init__ does, by a loop over the fields: bind(self, args, kwargs)
    sets every field and calls __post_init__ (True), or, for arguments that do not bind (too
    many, unknown, given twice, missing), sets nothing and returns False: the compiled
    __init__ then raises the TypeError dataclasses words."""
    params = tuple(f.name for f in all_fields.values() if f.init)
    known = frozenset(params)
    plan = tuple(all_fields.values())
    post = hasattr(cls, "__post_init__")
    put = object.__setattr__ if frozen else setattr

    def bind(self, args: tuple, kwargs: dict) -> bool:
        if len(args) > len(params) or not known.issuperset(kwargs):
            return False
        given = dict(zip(params, args, strict=False))  # fewer args than params: the rest by name
        if not given.keys().isdisjoint(kwargs):
            return False
        given.update(kwargs)
        values = []
        for f in plan:
            if f.init and f.name in given:
                values.append((f.name, given[f.name]))
            elif f.default_factory is not MISSING:
                values.append((f.name, f.default_factory()))
            elif f.default is not MISSING:
                values.append((f.name, f.default))
            elif f.init:
                return False  # a required argument is missing
        for field_name, value in values:  # init=False without a default: for __post_init__
            put(self, field_name, value)
        if post:
            self.__post_init__()
        return True

    return bind


def _compile(cls: type, name: str, all_fields: dict[str, Field], frozen: bool):
    """The method as dataclasses writes it, from one small compiled string."""
    scope: dict = {"__name__": cls.__module__}
    mine = "".join(f"self.{n}," for n in all_fields)
    if name == "__eq__":
        theirs = "".join(f"other.{n}," for n in all_fields)
        lines = ["def __eq__(self, other):", "  if other.__class__ is self.__class__:",
                 f"    return ({mine}) == ({theirs})", "  return NotImplemented"]
    elif name == "__hash__":
        lines = ["def __hash__(self):", f"  return hash(({mine}))"]
    else:
        lines = _init_lines(cls, all_fields, frozen, scope)
    exec("\n".join(lines), scope)  # our own text, built from identifiers
    fn = scope[name]
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    return fn


def _init_lines(cls: type, all_fields: dict[str, Field], frozen: bool, scope: dict) -> list[str]:
    me = _SELF_NAMES[1] if "self" in all_fields else _SELF_NAMES[0]
    scope.update(_HAS_FACTORY=_HAS_FACTORY, _setattr=object.__setattr__)
    params, body = [me], []
    for f in all_fields.values():
        name = f.name
        if f.default_factory is not MISSING:
            scope[f"_factory_{name}"] = f.default_factory
            value = (f"_factory_{name}() if {name} is _HAS_FACTORY else {name}" if f.init
                     else f"_factory_{name}()")
        elif f.init:
            value = name
        elif f.default is not MISSING:
            scope[f"_default_{name}"] = f.default
            value = f"_default_{name}"
        else:
            continue  # init=False without a default: left for __post_init__
        if f.init:
            if f.default_factory is not MISSING:
                params.append(f"{name}=_HAS_FACTORY")
            elif f.default is not MISSING:
                scope[f"_default_{name}"] = f.default
                params.append(f"{name}=_default_{name}")
            else:
                params.append(name)
        body.append(f"  _setattr({me}, {name!r}, {value})" if frozen
                    else f"  {me}.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append(f"  {me}.__post_init__()")
    return [f"def __init__({', '.join(params)}):", *(body or ["  pass"])]


def _repr_of(cls: type, names: tuple[str, ...]):
    running: set[tuple[int, int]] = set()
    ident = sys.modules["_thread"].get_ident  # loaded by the interpreter itself at start

    def __repr__(self) -> str:
        key = (id(self), ident())
        if key in running:
            return "..."  # a record that contains itself (reprlib.recursive_repr)
        running.add(key)
        try:
            inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        finally:
            running.discard(key)
        return f"{self.__class__.__qualname__}({inner})"

    __repr__.__qualname__ = f"{cls.__qualname__}.__repr__"
    return __repr__


def _add_frozen_guards(cls: type, all_fields: dict[str, Field], own) -> None:
    names = frozenset(all_fields)
    for method in ("__setattr__", "__delattr__"):
        if method in own:
            raise TypeError(f"Cannot overwrite attribute {method} in class {cls.__name__}")

    def __setattr__(self, name: str, value: object) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    for fn in (__setattr__, __delattr__):
        fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
        setattr(cls, fn.__name__, fn)


def _getstate(self) -> list:
    return [getattr(self, f) for f in getattr(self, _FIELDS)]


def _setstate(self, state: list) -> None:
    for name, value in zip(getattr(self, _FIELDS), state, strict=False):
        object.__setattr__(self, name, value)


# ------------------------------------------------------------------------------ named tuples


_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                         "_field_defaults", "_make", "_replace", "_asdict", "_source"})
_SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})


class _NamedTupleMeta(type):
    """typing.NamedTuple's class statement (3.11's NamedTupleMeta), without its check of each
    annotation: with `from __future__ import annotations` that check compiles every field's
    text into a ForwardRef (~0.1 ms a field; the state's 16 row types paid ~5 ms a tick,
    issue 27). Annotations stay the strings they are; everything else is typing's."""

    def __new__(mcls, typename: str, bases: tuple, ns: dict):
        if not bases:  # the base itself
            return super().__new__(mcls, typename, bases, ns)
        if bases != (NamedTuple,):
            raise TypeError("can only inherit from a NamedTuple type")
        from collections import namedtuple  # lazy: loaded by typing already, on the tick

        types = ns.get("__annotations__", {})
        defaults = []
        for name in types:
            if name in ns:
                defaults.append(name)
            elif defaults:
                raise TypeError(f"Non-default namedtuple field {name} cannot follow default"
                                f" field{'s' if len(defaults) > 1 else ''} {', '.join(defaults)}")
        cls = namedtuple(typename, list(types), defaults=[ns[n] for n in defaults],
                         module=ns["__module__"])
        cls.__annotations__ = cls.__new__.__annotations__ = dict(types)
        for key in ns:
            if key in _PROHIBITED:
                raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
            if key not in _SPECIAL and key not in cls._fields:
                setattr(cls, key, ns[key])
        return cls


if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    NamedTuple = _NamedTupleMeta("NamedTuple", (), {"__module__": __name__})
