"""YAML with bounds: every YAML text mdcron reads (task files, scheduler.yaml, the editor's
read-back) goes through `load_yaml`, so a hostile file costs milliseconds and a clear error.

PyYAML alone has three ways to be killed by a small file:
- nesting: libyaml's composer (CSafeLoader) recurses once per level in C, so ~25,000 nested
  `[` overflow the C stack (SIGSEGV, not an exception: the whole tick dies);
- aliases: `&a [x,x,..]`, `&b [*a,*a,..]`, ... is a few hundred bytes that expand to billions of
  values for anything that walks the result (`==`, `repr`, json), which then runs for minutes or
  until MemoryError;
- size: a big file is slow whatever it holds.

So events come from the parser (C when libyaml is there; it keeps its own stack, no recursion)
and the Python composer is wrapped to count, before anything is built: the nesting depth, the
aliases, and the values the document would hold with every alias expanded (and the depth it
would have). Past a limit the load stops with YamlLimitError, a YAMLError with a line mark, so
callers report it like any other YAML error. The limits are far above any real file."""

from __future__ import annotations

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.resolver import Resolver

try:
    from yaml import CParser as _Parser  # libyaml: fast, and its parser does not recurse
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Parser(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)

MAX_BYTES = 1024 * 1024  # a YAML text (a frontmatter, a scheduler.yaml) of at most 1 MiB
MAX_DEPTH = 64  # nested lists/mappings, aliases expanded
MAX_ALIASES = 100  # `*name` references in one document
MAX_VALUES = 10_000  # scalars, lists and mappings in one document, aliases expanded


class YamlLimitError(yaml.MarkedYAMLError):
    """The text is over one of the limits; `problem` says which, `problem_mark` where."""

    def __init__(self, problem: str, mark: yaml.Mark | None = None):
        super().__init__(problem=problem, problem_mark=mark)


class _BoundedComposer(Composer):
    """PyYAML's composer, counting depth, aliases and expanded values as it goes."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0  # collections open around the node being composed
        self._values = 0  # values so far, every alias counted as the values it stands for
        self._aliases = 0
        self._heights: list[int] = []  # per open node: the tallest child so far
        self._finished: dict[int, tuple[int, int]] = {}  # id(anchored node) -> (values, height)

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            self._alias(event)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        start = self._values
        self._heights.append(0)
        node = super().compose_node(parent, index)
        height = self._heights.pop() + 1
        self._depth -= 1
        self._grow(1, height, event.start_mark)
        if getattr(event, "anchor", None) is not None:
            self._finished[id(node)] = (self._values - start, height)
        return node

    def _alias(self, event: AliasEvent) -> None:
        self._aliases += 1
        if self._aliases > MAX_ALIASES:
            raise YamlLimitError(f"more than {MAX_ALIASES} aliases (*name) in one file",
                                 event.start_mark)
        node = self.anchors.get(event.anchor)
        if node is None:
            return  # an undefined alias: the composer itself reports it
        found = self._finished.get(id(node))
        if found is None:
            raise YamlLimitError(f"the alias *{event.anchor} is inside the value it refers to "
                                 "(a value that contains itself)", event.start_mark)
        values, height = found
        if self._depth + height > MAX_DEPTH:
            raise YamlLimitError(f"the alias *{event.anchor} nests the value more than "
                                 f"{MAX_DEPTH} levels deep", event.start_mark)
        self._grow(values, height, event.start_mark)

    def _grow(self, values: int, height: int, mark: yaml.Mark) -> None:
        self._values += values
        if self._values > MAX_VALUES:
            raise YamlLimitError(f"more than {MAX_VALUES:,} values once aliases are expanded "
                                 "(an alias bomb?)", mark)
        if self._heights:
            self._heights[-1] = max(self._heights[-1], height)


class _BoundedLoader(_BoundedComposer, _Parser, SafeConstructor, Resolver):  # type: ignore[misc]
    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        _BoundedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


def load_yaml(text: str) -> object:
    """The single YAML document in `text`, as yaml.safe_load gives it; yaml.YAMLError (a
    YamlLimitError for a text over the limits) when it cannot be read safely."""
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise YamlLimitError(f"more than {MAX_BYTES // 1024 // 1024} MiB of YAML")
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
