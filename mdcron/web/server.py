"""`scheduler.py web`: the token, the bind rules, uvicorn.

Lazy imports: uvicorn and the app (Starlette, Jinja2) load only when the server starts, not when
its options are checked.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .security import allowed_hosts, is_loopback, load_token

DEFAULT_TOKEN = "web-token"  # in the state folder


def serve(home: Path, host: str, port: int, token_file: Path | None,
          allow_hosts: list[str], metrics_listen: str | None = None) -> int:
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
    token = load_token(path, root=None if token_file else home)
    import uvicorn

    from .app import create_app

    app = create_app(home, token, allowed_hosts(host, allow_hosts))
    shown = f"[{host}]" if ":" in host else host
    print(f"mdcron web: http://{shown}:{port}/?token={token}", flush=True)
    print(f"(the token is in {path}; the link sets a cookie and drops it from the address)",
          flush=True)
    if metrics_listen is not None:
        print(f"mdcron metrics: http://{metrics_listen}/metrics (no token)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                server_header=False)
    return 0
