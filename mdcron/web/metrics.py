"""Issue 26: `/metrics` for Prometheus, behind the dashboard's token (`Authorization: Bearer`),
or on `web --metrics-listen HOST:PORT` without it (prometheus_client's own server, a thread
beside uvicorn). The figures are the tick's textfile's (state/metrics.py gathers them for
both); this module only hands them to prometheus_client.

Lazy imports: prometheus_client loads when /metrics is first asked or its server starts, never
on the tick's path nor for the dashboard's pages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..settings.config import load_config
from ..state.metrics import HOME_GAUGES, RUNS, TASK_GAUGES, Figures, figures
from ..state.metrics_file import TICK_HELP
from ..state.store import state_store


def gather(home: Path) -> Figures:
    """The figures now (none before the first tick made the state)."""
    config, _ = load_config(home)
    if not config.state_exists:
        return Figures()
    with state_store(config) as store:
        return figures(store.metric_rows())


class Collector:
    """prometheus_client's custom-collector interface: every scrape reads the state afresh."""

    def __init__(self, home: Path):
        self.home = home

    def collect(self) -> Iterator[object]:
        from prometheus_client.core import (  # lazy: only on a scrape
            CounterMetricFamily,
            GaugeMetricFamily,
        )

        data = gather(self.home)
        ids = sorted(data.tasks)
        for name, text, attr in TASK_GAUGES:
            family = GaugeMetricFamily(name, text, labels=["task"])
            for task_id in ids:
                value = getattr(data.tasks[task_id], attr)
                if value is not None:
                    family.add_metric([task_id], float(value))
            yield family
        runs = CounterMetricFamily(RUNS[0], RUNS[1], labels=["task", "status"])
        for task_id in ids:
            for status, count in sorted(data.tasks[task_id].runs.items()):
                runs.add_metric([task_id, status], count)
        yield runs
        for name, text, attr in HOME_GAUGES:
            yield GaugeMetricFamily(name, text, value=getattr(data, attr))
        if data.tick is not None:
            for (name, text), value in zip(TICK_HELP, data.tick, strict=True):
                yield GaugeMetricFamily(name, text, value=value)


def registry(home: Path) -> object:
    from prometheus_client import CollectorRegistry  # lazy: only for /metrics

    found = CollectorRegistry(auto_describe=False)
    found.register(Collector(home))  # type: ignore[arg-type]
    return found


def routes(web) -> list[Route]:
    found: list[object] = []

    async def metrics(request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # lazy: as above

        if not found:
            found.append(registry(web.home))
        body = await run_in_threadpool(generate_latest, found[0])  # the state read blocks
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return [Route("/metrics", metrics)]


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:9108` for IPv6) -> (host, port); ValueError saying what is right."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--metrics-listen: expected HOST:PORT, e.g. 127.0.0.1:9108; got "
                         f"{text!r}")
    return host, int(port)


def serve_metrics(home: Path, host: str, port: int) -> None:
    """prometheus_client's HTTP server for /metrics without a token, in a daemon thread."""
    from prometheus_client import start_http_server  # lazy: only with --metrics-listen

    start_http_server(port, addr=host, registry=registry(home))  # type: ignore[arg-type]
