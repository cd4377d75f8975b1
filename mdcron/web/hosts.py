"""The Health page's hosts (issue 11): every host a shared state knows, when it last ticked
(the database's clock, as hosts/files.py judges it) and which task files its copy of differs on.
None with the embedded SQLite state: one host, nothing to compare."""

from __future__ import annotations

from ..cli.queries import iso
from ..hosts.files import DEAD_AFTER, differing
from ..settings.config import Config
from ..settings.state_url import mask
from ..state.store import state_store


def hosts_view(config: Config) -> dict | None:
    """{"hosts": [...], "error": str | None}, or None when the state is not shared."""
    if not config.state_url:
        return None

    try:
        with state_store(config) as store:
            seen = {h.name: (h.seen_at, h.age) for h in store.host_ticks()}
            files = store.file_counts()
            odd = differing(store)
    except Exception as exc:  # unreachable, or no tables yet: the doctor check says which
        return {"hosts": [], "error": mask(str(exc))}
    out = []
    for name in sorted(set(seen) | set(files)):
        at, age = seen.get(name, (None, None))
        out.append({
            "name": name, "this": name == config.host_name,
            "seen_at": iso(at), "alive": age is not None and age <= DEAD_AFTER,
            "files": int(files.get(name, 0)),
            # the tasks whose copies differ, with this host's short hash (absent: no copy)
            "differs": [{"task_id": t, "sha": by_host.get(name)}
                        for t, by_host in sorted(odd.items())],
        })
    return {"hosts": out, "error": None}
