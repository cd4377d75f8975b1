"""`scheduler.py web`: the home it serves, the token, the bind rules, the login link, uvicorn and
its limits. `cmd_web` is the command's handler: cli/ parses the arguments, and the entry point
(scheduler.py, above every layer) joins this handler to the CLI, since cli/ never imports web/.

The permanent token is never printed (stdout may be journald or `docker logs`): the banner
gives a login link with a one-time code (sessions.py), useless once used or after CODE_TTL,
and names the token file for scripts.

Lazy imports: uvicorn and the app (Starlette, Jinja2) load only when the server starts, not when
its options are checked.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

from ..core.accounts import owner_name
from ..state.store import limit_lock_wait
from .security import allowed_hosts, is_loopback
from .sessions import CODE_TTL, REVOKED, Sessions, revoke_everywhere
from .token_file import TokenFileError, load_token

DEFAULT_TOKEN = "web-token"  # in the state folder
LIMIT_CONCURRENCY = 2048  # connections (and requests) at once; past it uvicorn answers 503
KEEP_ALIVE = 5  # seconds an idle kept-alive connection stays open
MAX_HEAD = 16 * 1024  # bytes of a request line and headers (h11)


def cmd_web(home: Path, args: argparse.Namespace) -> int:
    """`scheduler.py web`, called before the config is loaded: the page shows a broken one."""
    # issue 24: a missing or mistyped home is refused, never created (the page would say
    # "Tasks run normally" about an empty folder)
    if not home.is_dir() or not any((home / n).exists() for n in ("tasks", "scheduler.yaml",
                                                                   "state")):
        what = "does not exist" if not home.exists() else (
            "is not a folder" if not home.is_dir() else
            "has no tasks/ folder, scheduler.yaml or state/: it is not an mdcron home")
        print(f"mdcron: --home {home} {what}. Give the folder that holds tasks/ (e.g. --home"
              f" ~/mdcron, or set MDCRON_HOME), or create it first: mkdir -p {home}/tasks",
              file=sys.stderr)
        return 2

    return serve(home, args.host, args.port, args.token_file, args.allow_host or [],
                 args.metrics_listen, revoke=args.revoke_sessions)


def serve(home: Path, host: str, port: int, token_file: Path | None,
          allow_hosts: list[str], metrics_listen: str | None = None,
          revoke: bool = False) -> int:
    if revoke:
        marker = revoke_everywhere(home / "state", home, time.time())
        print(f"mdcron: every dashboard session of {home} is revoked (a running server ends"
              f" them at its next request; {marker.name} in the state folder says when)."
              " Log in again with a new link (restart `scheduler.py web`) or the token.")
        return 0
    if not is_loopback(host) and token_file is None:
        print(f"mdcron: refusing to listen on {host} without --token-file: anyone who can"
              " reach that address could start commands. Give --token-file FILE (created 0600"
              " when missing), or keep the default 127.0.0.1 and use a reverse proxy.",
              file=sys.stderr)
        return 2
    if metrics_listen is not None:  # issue 26: /metrics without the token, on its own port
        from .metrics import parse_listen, serve_metrics  # lazy: prometheus_client

        try:
            metrics_host, metrics_port = parse_listen(metrics_listen)
            serve_metrics(home, metrics_host, metrics_port)
        except (ValueError, OSError) as exc:
            print(f"mdcron: {exc}", file=sys.stderr)
            return 2
    path = token_file or (home / "state" / DEFAULT_TOKEN)
    try:
        token = load_token(path, root=None if token_file else home)
    except TokenFileError as exc:
        print(f"mdcron: {exc}", file=sys.stderr)
        return 2
    import uvicorn  # lazy: only when the server starts

    from .app import WEB_LOCK_WAIT, create_app  # lazy: Starlette, Jinja2 (as uvicorn)
    from .transport import BoundedH11  # lazy: uvicorn's protocol

    limit_lock_wait(WEB_LOCK_WAIT)
    _more_descriptors()
    sessions = Sessions(home / "state" / REVOKED)
    app = create_app(home, token, allowed_hosts(host, allow_hosts), sessions=sessions,
                     port=port, user=owner_name(os.geteuid()))
    code = sessions.new_code()
    shown = f"[{host}]" if ":" in host else host
    print(f"mdcron web: http://{shown}:{port}/login?code={code}", flush=True)
    print(f"(the link logs one browser in, once, within {CODE_TTL / 60:.0f} minutes; scripts"
          f" send Authorization: Bearer with the token in {path})", flush=True)
    if metrics_listen is not None:
        print(f"mdcron metrics: http://{metrics_listen}/metrics (no token)", flush=True)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            server_header=False, http=BoundedH11, lifespan="off",
                            timeout_keep_alive=KEEP_ALIVE,
                            limit_concurrency=LIMIT_CONCURRENCY,
                            h11_max_incomplete_event_size=MAX_HEAD)
    uvicorn.Server(config).run()
    return 0


def _more_descriptors() -> None:
    """Raise the soft limit on open files to the hard one: idle sockets are capped
    (transport.py), but a busy page should not run out at 1,024."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
