"""Step timestamps for `bench/held.py --trace` (on sys.path through PYTHONPATH; the tick reads
nothing of it unless MDCRON_TRACE is set). Once the held tick waits for its go, the functions
named below (and in TRACE_EXTRA, `module:Qual.name,...`) print `@@ thread label> epoch` and
`@@ thread label< epoch` around their first TRACE_LIMIT (default 1) calls; held.py prints them
relative to the go, and `steps.py OUTPUT` gives each step's median over the runs."""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import os
import sys
import threading
import time

TARGETS = [
    "mdcron.cli.warm:Ahead._check", "mdcron.state.cache_key:code_fingerprint",
    "mdcron.state.cache_key:config_text", "mdcron.schedule.cache:View.refresh",
    "mdcron.state.idle:scan", "mdcron.cli.commands:_paused_tick", "mdcron.run.tick:run_tick",
    "mdcron.run.shared_tick:opening", "mdcron.run.recovery:recover",
    "mdcron.schedule.cache:View.duplicates", "mdcron.run.tick:current_owner",
    "mdcron.schedule.cache:View.observe", "mdcron.schedule.cache:View.candidates",
    "mdcron.schedule.cache:View.plain", "mdcron.schedule.cache:View.claimed",
    "mdcron.schedule.cache:task_states", "mdcron.run.tick:plan",
    "mdcron.state.store:Store.claim_slots", "mdcron.run.dispatch:run_all",
    "mdcron.run.dispatch:run_one", "mdcron.run.dispatch:read_comments",
    "mdcron.run.ladder:execute_claimed", "mdcron.run.attempt:run_attempt",
    "mdcron.run.attempt:task_environment", "mdcron.run.proctree:Tree.open",
    "mdcron.run.process:run_command", "mdcron.run.proctree:Tree.join",
    "mdcron.run.proctree:Tree.started", "mdcron.run.start_gate:StartGate.open",
    "mdcron.run.dispatch:after_one", "subprocess:Popen._execute_child",
]
LIMIT = int(os.environ.get("TRACE_LIMIT", "1"))
_COUNT: dict[str, int] = {}


def _emit(label: str) -> None:
    sys.stdout.write(f"@@ {threading.current_thread().name} {label} {time.time():.6f}\n")


def _wrap(label, fn):
    @functools.wraps(fn)
    def traced(*args, **kwargs):
        n = _COUNT.get(label, 0)
        _COUNT[label] = n + 1
        if n >= LIMIT:
            return fn(*args, **kwargs)
        _emit(f"{label}>")
        try:
            return fn(*args, **kwargs)
        finally:
            _emit(f"{label}<")

    traced.__traced__ = True
    return traced


def _install() -> None:
    extra = [x for x in os.environ.get("TRACE_EXTRA", "").split(",") if x]
    for target in TARGETS + extra:
        modname, qual = target.split(":")
        try:
            owner = importlib.import_module(modname)
        except Exception:  # noqa: S112  # a tree without it: nothing to trace there
            continue
        parts = qual.split(".")
        for part in parts[:-1]:
            owner = getattr(owner, part, None)
        orig = getattr(owner, parts[-1], None) if owner is not None else None
        if orig is None or getattr(orig, "__traced__", False):
            continue
        new = _wrap(qual, orig)
        setattr(owner, parts[-1], new)
        if len(parts) == 1:  # a function: also where other modules imported it by name
            for module in list(sys.modules.values()):
                names = getattr(module, "__dict__", None) or {}
                for name, value in list(names.items()):
                    if value is orig:
                        names[name] = new


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps cli/warm.Ahead.wait once that module loads: the targets are installed then."""

    def find_spec(self, name, path, target=None):
        if name != "mdcron.cli.warm":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = spec.loader
        load = loader.exec_module

        def exec_module(module):
            load(module)
            wait = module.Ahead.wait

            def traced_wait(self, checks=None):
                _install()
                _emit("wait>")
                try:
                    return wait(self, checks)
                finally:
                    _emit("wait<")

            module.Ahead.wait = traced_wait

        loader.exec_module = exec_module
        return spec


if os.environ.get("MDCRON_TRACE"):
    sys.meta_path.insert(0, _Finder())
