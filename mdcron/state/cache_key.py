"""What every cached row of the task-file cache depends on besides its own file: the key.

The cache (schedule/cache.py) and the idle check (idle.py) trust a row only under the key it
was written with: the cache format, mdcron's version and source files (the code fingerprint),
the schema, $HOME, the host name and scheduler.yaml's bytes (a digest: the config may hold a
literal password, which the state must not keep). The system zone (zone_key) is kept per row.
Stdlib only (os and the builtin SHA-256): it sits on the idle tick's path.
"""

from __future__ import annotations

import os

try:  # the builtin SHA-256: the same digest without loading OpenSSL (hashlib: ~2 ms a tick)
    from _sha256 import sha256  # CPython 3.11
except ImportError:  # pragma: no cover  (3.12 renamed it; any other Python: hashlib's)
    try:
        from _sha2 import sha256  # type: ignore[no-redef]
    except ImportError:
        from hashlib import sha256  # type: ignore[no-redef,assignment]

from .. import __version__
from .schema import SCHEMA_VERSION  # a module of SQL text: nothing imported, stdlib-only path

CACHE_FORMAT = 2
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_REG, _FMT = 0o100000, 0o170000

# Set by cli.main: the scheduler.yaml text read just before load_config built this Config.
noted_config: tuple[object, str] | None = None


def note_config(config: object, text: str | None) -> None:
    global noted_config
    noted_config = (config, text) if text is not None else None


def config_text(home: str) -> str | None:
    """scheduler.yaml as text ('-' when there is none); None when it cannot be read."""
    # O_NONBLOCK, then fstat: a FIFO in its place must not hang the tick (a symlink is
    # followed: people link their config). Not a file: None, and load_config says why.
    try:
        fd = os.open(os.path.join(home, "scheduler.yaml"),
                     os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return "-"
    except OSError:
        return None
    try:
        if os.fstat(fd).st_mode & _FMT != _REG:
            return None
        os.set_blocking(fd, True)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return "+" + b"".join(chunks).decode("utf-8", "surrogateescape")


_pinned_code: str | None = None  # pin_code: the fingerprint a held tick checked at its go
_seen_code: str | None = None  # the fingerprint cache_key last read (pin_seen_code)


def pin_code(fingerprint: str | None) -> None:
    """For the rest of this process (one tick) code_fingerprint answers `fingerprint`: the
    daemon's held tick (cli/warm.py) has just compared it to the files, and a cold tick reads
    its code once too."""
    global _pinned_code
    _pinned_code = fingerprint


def pin_seen_code() -> None:
    """A cold tick whose idle check declined: the code it read there (cache_key) stands for
    the rest of the tick (config_data and cache.load ask again; issue 27: ~0.5 ms each)."""
    if _seen_code is not None:
        pin_code(_seen_code)


def code_folders() -> list[str]:
    """The package's folders whose modules code_fingerprint reads."""
    found, folders = [], [PACKAGE_DIR]
    while folders:
        folder = folders.pop()
        found.append(folder)
        with os.scandir(folder) as entries:
            folders += [e.path for e in entries
                        if e.is_dir() and not e.name.startswith(("_", "."))]
    return found


def code_fingerprint() -> str:
    """Name, size and mtime of every module of mdcron: new code never trusts old rows."""
    if _pinned_code is not None:
        return _pinned_code
    parts = []
    folders = [PACKAGE_DIR]
    while folders:  # the package and its folders (web/ too: cheap, and never wrong)
        folder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    name = entry.path[len(PACKAGE_DIR) + 1:]
                    parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
                elif entry.is_dir() and not entry.name.startswith(("_", ".")):
                    folders.append(entry.path)
    return ",".join(sorted(parts))


_last_key: tuple[tuple[str, str, str, str], str] | None = None  # cache_key's last digest


def cache_key(config: str) -> str:
    """Everything every cached row depends on besides its own file; `config` from config_text.
    A digest: the config's text may hold a literal password, which the state must not keep.
    The same inputs as the last call give its digest again: a due tick asks three times (the
    idle check, config_data, cache.load) with the code pinned, and SHA-256 over the ~9 KB of
    the code's fingerprint cost each ~0.4 M instructions (issue 27)."""
    global _seen_code, _last_key
    _seen_code = code = code_fingerprint()
    inputs = (code, os.environ.get("HOME", ""), config,
              os.uname().nodename)  # the default `host` (cache_elsewhere depends on it)
    last = _last_key
    if last is not None and last[0] == inputs:
        return last[1]
    key = sha256("\n".join((str(CACHE_FORMAT), __version__, str(SCHEMA_VERSION), *inputs))
                 .encode("utf-8", "surrogateescape")).hexdigest()
    _last_key = (inputs, key)
    return key


def zone_key() -> str:
    """What schedule.resolve_zone(None) reads, raw: $TZ, /etc/localtime's target, /etc/timezone."""
    try:
        link = os.readlink("/etc/localtime")
    except OSError:
        link = ""
    try:
        with open("/etc/timezone", encoding="utf-8") as handle:
            name = handle.read().strip()
    except (OSError, ValueError):
        name = ""
    return f"{os.environ.get('TZ', '')}|{link}|{name}"
