"""The Task page's duration chart (issue 24 item 9): the last runs as bars, drawn here as inline
SVG (the CSP allows no script to draw it). Oldest on the left; a bar's colour is its status
(style.css), its tooltip the run, status and duration; each bar links to its run."""

from __future__ import annotations

from markupsafe import Markup, escape

from .find import DOT_CLASS

WIDTH, HEIGHT, PAD = 600, 120, 14
SLOTS = 50  # the Task page lists the last 50 runs


def _seconds(ms: int | float) -> str:
    s = ms / 1000
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def duration_chart(runs: list[dict]) -> Markup:
    """`runs` newest first (as the page lists them); those with a duration become bars."""
    done = [r for r in reversed(runs) if r.get("duration_ms") is not None]
    if not done:
        return Markup('<p class="muted">no finished run to chart yet</p>')
    top = max(float(r["duration_ms"]) for r in done) or 1.0
    step = (WIDTH - 2) / max(len(done), SLOTS)  # a few runs are a few bars, not wide blocks
    bar = max(1.0, step * 0.8)
    parts = []
    for i, r in enumerate(done):
        h = max(1.0, (HEIGHT - PAD) * float(r["duration_ms"]) / top)
        x, y = 1 + i * step, HEIGHT - h
        tip = f"run {r['run_id']}: {r['status']}, {_seconds(r['duration_ms'])}"
        parts.append(Markup('<a href="/runs/{}"><rect class="b-{}" x="{:.1f}" y="{:.1f}"'
                            ' width="{:.1f}" height="{:.1f}"><title>{}</title></rect></a>')
                     .format(r["run_id"], DOT_CLASS.get(r["status"], "l"), x, y, bar, h,
                             escape(tip)))
    label = (f"durations of the last {len(done)} finished runs, longest"
             f" {_seconds(top)}")
    return Markup('<figure class="chart"><svg viewBox="0 0 {} {}" role="img" aria-label="{}"'
                  ' preserveAspectRatio="none">{}<text x="2" y="10">{}</text></svg>'
                  '<figcaption class="muted">{} (oldest left; red failed, green succeeded)'
                  '</figcaption></figure>').format(
        WIDTH, HEIGHT, label, Markup("").join(parts), _seconds(top), label)
