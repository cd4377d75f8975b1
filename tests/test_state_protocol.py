"""store.Store implements state.protocol.State: every operation the protocol lists exists on
Store with the same parameters (names, kinds, defaults), so the seam a back end plugs into
says what the callers really get."""

from __future__ import annotations

import inspect

from mdcron.state.protocol import State
from mdcron.state.store import Store


def members(cls: type) -> dict[str, object]:
    return {n: v for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}


def parameters(fn: object) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_store_has_every_protocol_operation_with_its_parameters():
    for name, fn in members(State).items():
        assert hasattr(Store, name), f"Store has no {name}"
        assert parameters(getattr(Store, name)) == parameters(fn), name


def test_every_public_store_operation_is_in_the_protocol():
    extra = {n for cls in Store.__mro__ if cls.__module__.startswith("mdcron.")
             for n in members(cls)} - set(members(State)) - {"dialect"}
    assert not extra, f"add these to state/protocol.py: {sorted(extra)}"
