"""mdcron.core.records (issue 27): the dataclasses subset the project uses, without the import
cost. Each feature is checked against the standard dataclasses on the same class definitions;
and a tick (one due task, or idle) never loads dataclasses, inspect, ast nor dis."""

from __future__ import annotations

import ast
import copy
import dataclasses
import pickle
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import REPO
from conftest import age_cache as age

from mdcron.core import records


def define(lib):
    """The same record shapes the project uses, built by `lib` (dataclasses or records)."""

    @lib.dataclass(frozen=True, slots=True)
    class Point:
        """A frozen slots record."""

        x: int
        tags: list[str] = lib.field(default_factory=list)
        secret: str | None = lib.field(default=None, repr=False)
        label: str = "p"

    @lib.dataclass
    class Box:
        name: str
        point: Point | None = None
        extra: dict[str, object] = lib.field(default_factory=dict)
        doubled: int = lib.field(init=False)
        seen: list[str] = lib.field(default_factory=list)

        def __post_init__(self) -> None:
            self.doubled = len(self.name) * 2
            self.seen.append("post_init")

    @lib.dataclass(slots=True)
    class Counter:
        hits: int = 0
        names: tuple[str, ...] = ()

    @lib.dataclass(slots=True, eq=False)
    class Handle:
        fd: int

    @lib.dataclass(frozen=True)
    class Plain:
        a: int
        b: str = "b"

    return Point, Box, Counter, Handle, Plain


STD = define(dataclasses)
OURS = define(records)


def both(fn):
    """fn(classes) built once by dataclasses and once by records: the two results."""
    return fn(*STD), fn(*OURS)


def test_repr_eq_and_hash_match_dataclasses():
    def probe(Point, Box, Counter, Handle, Plain):
        p = Point(1, ["a"], "s")
        box = Box("abc", p, {"k": (p, [Counter(2)])})
        return (repr(p), repr(box), repr(Counter()), repr(Plain(3)),
                p == Point(1, ["a"], "s"), p == Point(1, ["a"], "t"), p == Point(2),
                Counter(1) == Counter(1), Handle(3) == Handle(3),
                hash(Point(1, (), "s")) == hash(Point(1, (), "s")),
                hash(Plain(1)) == hash(Plain(1)), Plain(1) == Plain(1, "b"),
                Box.__hash__ is None, Counter.__hash__ is None, Handle.__hash__ is object.__hash__,
                (p == (1, ["a"], "s", "p")), Point.__match_args__, Box.__match_args__)

    std, ours = both(probe)
    assert ours == std


def test_init_positional_keyword_defaults_and_errors():
    def probe(Point, Box, Counter, Handle, Plain):
        out = [repr(Point(1)), repr(Point(x=2, label="q")), repr(Point(3, ["t"], None, "r"))]
        for call in (lambda: Point(), lambda: Point(1, nope=2), lambda: Box("n", doubled=3),
                     lambda: Point(1, [], None, "l", "extra")):
            with pytest.raises(TypeError) as err:
                call()
            out.append(str(err.value).split("__init__() ")[-1])
        return out

    std, ours = both(probe)
    assert ours == std


def test_default_factory_gives_each_instance_its_own():
    for Point, Box, *_ in (STD, OURS):
        one, two = Point(1), Point(2)
        one.tags.append("x")
        assert (one.tags, two.tags) == (["x"], [])
        assert Box("a").extra is not Box("a").extra


def test_post_init_runs_and_sets_init_false_fields():
    std, ours = both(lambda Point, Box, *_: (vars(Box("abcd")), vars(Box("x", seen=["given"]))))
    assert ours == std
    assert ours[0]["doubled"] == 8 and ours[1]["seen"] == ["given", "post_init"]


def test_frozen_records_refuse_assignment_and_deletion():
    Point, _, _, _, Plain = OURS
    for obj, name in ((Point(1), "x"), (Plain(1), "a")):
        with pytest.raises(records.FrozenInstanceError, match=f"cannot assign to field '{name}'"):
            setattr(obj, name, 5)
        with pytest.raises(records.FrozenInstanceError, match=f"cannot delete field '{name}'"):
            delattr(obj, name)
        assert getattr(obj, name) == 1
    assert issubclass(records.FrozenInstanceError, AttributeError)


def test_frozen_assignment_messages_match():
    def probe(Point, Box, Counter, Handle, Plain):
        out = []
        for action in (lambda: setattr(Point(1), "x", 2), lambda: delattr(Plain(1), "b"),
                       lambda: setattr(Plain(1), "other", 2)):
            with pytest.raises(AttributeError) as err:
                action()
            out.append((type(err.value).__name__, str(err.value)))
        return out

    std, ours = both(probe)
    assert ours == std


def test_slots_classes_have_no_dict_and_keep_their_names():
    def probe(Point, Box, Counter, Handle, Plain):
        return [(cls.__slots__ if "__slots__" in cls.__dict__ else None,
                 hasattr(cls(1) if cls is not Box else cls("b"), "__dict__"),
                 cls.__qualname__, cls.__module__, cls.__doc__ if cls is Point else "no docstring",
                 "x" in cls.__dict__ or "hits" in cls.__dict__)
                for cls in (Point, Counter, Handle, Box)]

    std, ours = both(probe)
    assert ours == std
    assert ours[0][:2] == (("x", "tags", "secret", "label"), False)
    assert ours[0][4] == "A frozen slots record."  # (not dataclasses' signature for no docstring)


def test_class_level_defaults_like_dataclasses():
    def probe(Point, Box, Counter, Handle, Plain):
        return [(name, getattr(Box, name, "absent")) for name in ("name", "point", "extra",
                                                                   "doubled")] + [Plain.b]

    std, ours = both(probe)
    assert ours == std


def test_fields_replace_and_asdict_match():
    def probe(Point, Box, Counter, Handle, Plain):
        lib = records if Point in OURS else dataclasses
        p = Point(1, ["a"], "s")
        box = Box("abc", p, {"k": (p, [Counter(2, ("n",))])})
        described = [(f.name, f.type, f.default if f.default is not lib.MISSING else "MISSING",
                      f.default_factory if f.default_factory is not lib.MISSING else "MISSING",
                      f.init, f.repr) for f in lib.fields(Box) + lib.fields(p)]
        copied = lib.asdict(box)
        copied["point"]["tags"].append("changed")  # a copy: the record keeps its list
        errors = []
        for action in (lambda: lib.replace(p, nope=1), lambda: lib.replace(box, doubled=1),
                       lambda: lib.replace(Point, x=1), lambda: lib.asdict(Point),
                       lambda: lib.fields(3)):
            with pytest.raises((TypeError, ValueError)) as err:
                action()
            errors.append((type(err.value).__name__, str(err.value).split("__init__() ")[-1]))
        return (described, copied, p.tags, repr(lib.replace(p, label="z")),
                repr(lib.replace(box, name="abcdef")), lib.replace(Plain(1)) == Plain(1),
                errors, lib.is_dataclass(p), lib.is_dataclass(Point), lib.is_dataclass(3))

    std, ours = both(probe)
    assert ours == std


def test_asdict_recurses_into_namedtuples_and_copies_other_values():
    from typing import NamedTuple

    class Pair(NamedTuple):
        left: object
        right: object

    def probe(Point, Box, Counter, Handle, Plain):
        lib = records if Point in OURS else dataclasses
        box = Box("n", None, {"pair": Pair(Counter(1), {"s": {1, 2}}), "path": Path("/x")})
        out = lib.asdict(box)
        return out, type(out["extra"]["pair"]).__name__, out["extra"]["pair"].right["s"] is \
            box.extra["pair"].right["s"]

    std, ours = both(probe)
    assert ours == std


@records.dataclass(frozen=True, slots=True)
class Pickled:
    name: str
    count: int = 0


@records.dataclass(slots=True)
class PickledMutable:
    name: str
    items: list[int] = records.field(default_factory=list)


def test_frozen_and_slots_records_pickle_and_copy():
    for obj in (Pickled("a", 2), PickledMutable("b", [1])):
        assert pickle.loads(pickle.dumps(obj)) == obj
        assert copy.copy(obj) == obj and copy.deepcopy(obj) == obj
    deep = copy.deepcopy(PickledMutable("b", [1]))
    assert deep.items == [1]


def test_mistakes_are_refused_like_dataclasses():
    for lib in (dataclasses, records):
        with pytest.raises(TypeError, match="non-default argument 'b' follows default"):
            @lib.dataclass
            class Order:
                a: int = 1
                b: int
        with pytest.raises(ValueError, match="mutable default"):
            @lib.dataclass
            class Shared:
                a: list = []
        with pytest.raises(ValueError, match="cannot specify both default and default_factory"):
            lib.field(default=1, default_factory=list)


def test_classvar_annotations_are_not_fields():
    @records.dataclass
    class WithClassVar:
        LIMIT: ClassVar[int] = 3
        value: int = 0

    assert [f.name for f in records.fields(WithClassVar)] == ["value"]
    assert WithClassVar.LIMIT == 3 and WithClassVar(2).value == 2


def test_own_methods_are_kept():
    @records.dataclass(frozen=True)
    class Custom:
        a: int

        def __repr__(self) -> str:
            return "custom"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    assert (repr(Custom(1)), Custom(1) == Custom(2), hash(Custom(1))) == ("custom", True, 7)


def test_a_record_that_contains_itself_repr():
    def probe(Point, Box, *_):
        box = Box("a")
        box.extra["me"] = box
        return repr(box)

    std, ours = both(probe)
    assert ours == std


# ------------------------------------------------------------------------- what a tick loads


def test_no_project_module_imports_dataclasses():
    found = []
    for path in sorted((REPO / "mdcron").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            found += [f"{path.relative_to(REPO)}:{node.lineno}" for n in names
                      if n and n.split(".")[0] == "dataclasses"]
    assert found == [], "import from mdcron.core.records instead (issue 27)"


PROBE = """
import sys
from mdcron.cli.main import main
code = main(sys.argv[1:])
print("PROBE", code, ",".join(m for m in ("dataclasses", "inspect", "ast", "dis",
                                          "mdcron.run.tick") if m in sys.modules))
"""
T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


def loaded(home: Path, at: datetime) -> tuple[int, set[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE, "--home", str(home), "tick", "--now",
                          at.isoformat()], cwd=REPO, capture_output=True, text=True, timeout=60)
    last = (out.stdout.splitlines() or [""])[-1]
    assert last.startswith("PROBE "), out.stdout + out.stderr
    _, code, mods = last.split(" ", 2)
    return int(code), set(filter(None, mods.split(",")))


def test_a_one_due_tick_and_the_idle_tick_never_load_dataclasses(home, write_task):
    write_task("every", schedule="* * * * *", command="true", timezone="UTC")
    write_task("daily", schedule="0 6 * * *", command="true", timezone="UTC")
    assert loaded(home, T0) == (0, {"mdcron.run.tick"})  # the first tick reads the files
    age(home)
    assert loaded(home, T0 + timedelta(minutes=1)) == (0, {"mdcron.run.tick"})  # one due, cached
    age(home)
    assert loaded(home, T0 + timedelta(minutes=1, seconds=30)) == (0, set())  # the idle tick


def test_generated_methods_are_compiled_on_first_use_and_kept():
    @records.dataclass(frozen=True, slots=True)
    class Lazy:
        a: int
        b: tuple[int, ...] = records.field(default_factory=tuple)

    names = ("__init__", "__eq__", "__hash__")
    stand_ins = {name: Lazy.__dict__[name] for name in names}
    one, two = Lazy(1), Lazy(a=1, b=())
    assert (one == two, hash(one) == hash(two), one != Lazy(1, (2,))) == (True, True, True)
    assert Lazy.__dict__["__init__"] is stand_ins["__init__"]  # built three times: not yet
    for n in range(records._INTERPRETED):
        Lazy(n)
    compiled = {name: Lazy.__dict__[name] for name in names}
    assert all(compiled[name] is not stand_ins[name] for name in names)
    assert compiled["__init__"].__code__.co_varnames[:3] == ("self", "a", "b")
    assert compiled["__init__"].__qualname__.endswith("Lazy.__init__")
    Lazy(2)
    assert {name: Lazy.__dict__[name] for name in names} == compiled  # compiled once


PROBE_COMPILES = """
import sys
from mdcron.core import records

compiled = []
sys.addaudithook(lambda event, args: compiled.append(1) if event == "exec" else None)


@records.dataclass(frozen=True, slots=True)
class Pair:
    a: int
    b: list = records.field(default_factory=list)


first = [Pair(1), Pair(2, [3]), Pair(a=4)]
before = len(compiled)
more = [Pair(n) for n in range(20)]
print(before, len(compiled), [p.a for p in first], first[1].b, more[-1])
"""


def test_init_compiled_only_once_a_class_is_built_often():
    """Issue 27: a record class built a few times (most of a tick's) never compiles its
    __init__; one built often compiles it once, at its ninth build."""
    out = subprocess.run([sys.executable, "-c", PROBE_COMPILES], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.split("\n")[0] == "0 1 [1, 2, 4] [3] Pair(a=19, b=[])", out.stderr


def test_interpreted_and_compiled_builds_agree():
    """The builds before the compile and after it give the same records and the same errors."""
    @records.dataclass
    class Row:
        x: int
        tags: list = records.field(default_factory=list)
        label: str = "p"
        hidden: int = records.field(default=7, init=False)

    built = [(r := repr(Row(n, label=str(n))))[r.index("Row("):] for n in range(12)]
    assert built == [f"Row(x={n}, tags=[], label='{n}', hidden=7)" for n in range(12)]
    assert Row.__init__.__code__.co_varnames[:4] == ("self", "x", "tags", "label")  # compiled
    words = []
    for call in (lambda: Row(), lambda: Row(1, nope=2), lambda: Row(1, x=2),
                 lambda: Row(1, [], "l", 4), lambda: Row(1, hidden=3)):
        with pytest.raises(TypeError) as err:
            call()
        words.append(str(err.value).split("__init__() ")[-1])
    assert words == ["missing 1 required positional argument: 'x'",
                     "got an unexpected keyword argument 'nope'",
                     "got multiple values for argument 'x'",
                     "takes from 2 to 4 positional arguments but 5 were given",
                     "got an unexpected keyword argument 'hidden'"]


def _tuples(base):
    class Row(base):
        """A row."""

        name: str
        size: int | None
        tags: tuple[str, ...] = ()
        kind: str = "x"

        def label(self) -> str:
            return f"{self.name}:{self.kind}"

        @classmethod
        def of(cls, name: str) -> Row:
            return cls(name, None)

    return Row


def test_named_tuple_behaves_as_typings():
    """core/records.NamedTuple against typing.NamedTuple: fields, defaults, methods,
    classmethods, the namedtuple API, repr, equality, the class statement's errors."""
    import typing

    def probe(Row):
        r = Row("a", 1)
        return (Row._fields, Row._field_defaults, repr(r), r == ("a", 1, (), "x"),
                r._replace(kind="y"), r._asdict(), Row._make(["b", 2, ("t",), "z"]),
                r.label(), Row.of("c"), Row.__doc__, Row.__name__, Row.__qualname__,
                Row.__module__, tuple(Row.__annotations__), isinstance(r, tuple), Row.__mro__[1:],
                copy.copy(r) == r)

    assert probe(_tuples(records.NamedTuple)) == probe(_tuples(typing.NamedTuple))
    for base in (records.NamedTuple, typing.NamedTuple):
        with pytest.raises(TypeError, match="Non-default namedtuple field b cannot follow"):
            class Bad(base):  # noqa: F811
                a: int = 1
                b: int
        with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _make"):
            class Worse(base):  # noqa: F811
                a: int

                def _make(self):  # noqa: ANN202
                    return None


def test_state_rows_skip_typings_annotation_check():
    """Issue 27: the state's row types keep their annotations as text (typing.NamedTuple
    compiles each into a ForwardRef when its class is made: ~0.1 ms a field, every tick)."""
    from mdcron.state.outbox import Message
    from mdcron.state.task_state import StateRow

    for cls in (StateRow, Message):
        assert all(isinstance(a, str) for a in cls.__annotations__.values()), cls
