"""Issue 28: mutmut learns which tests reach which function by recording calls in the pytest
process, so a function reached only through `scheduler.py` in a subprocess looks untested.
While mutmut collects its stats (MUTANT_UNDER_TEST=stats), tests/conftest.py puts this folder
on PYTHONPATH: each Python subprocess writes the functions it called to a file at exit, and
conftest hands them to mutmut for the test that ran it. Outside mutmut this does nothing."""

import atexit
import os

_HITS = os.environ.get("MUTMUT_MDCRON_HITS")

if _HITS and os.environ.get("MUTANT_UNDER_TEST") == "stats":

    def _dump() -> None:
        try:
            from mutmut.state import state  # only present in mutmut's own environment
        except ImportError:
            return
        names = set(state()._stats)
        if names:
            path = os.path.join(_HITS, f"{os.getpid()}.hits")
            with open(path + ".tmp", "w", encoding="utf-8") as handle:
                handle.write("\n".join(sorted(names)))
            os.replace(path + ".tmp", path)

    atexit.register(_dump)
