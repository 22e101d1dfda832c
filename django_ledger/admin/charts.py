"""Charts of the workers' counters, drawn by the server as inline SVG (no script, no CDN).

Each chart is a ``<figure>``: a title, the SVG (``role="img"``, colours from the admin
theme's CSS variables, so dark mode holds), and a ``<details>`` table of the same
numbers for screen readers. Times are in the user's time zone (``timezone.localtime``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, gettext_lazy, ngettext

from ..conf import get_ledger, ledger_settings
from ..core.counters import Counters, Series
from ..core.records import ms_to_datetime
from .display import duration_text

__all__ = [
    "WINDOW_CHOICES",
    "depth_chart",
    "line_chart",
    "read_series",
    "sparkline",
    "throughput_chart",
]

WINDOW_CHOICES = (
    ("hour", gettext_lazy("Last hour")),
    ("day", gettext_lazy("Last day")),
    ("week", gettext_lazy("Last week")),
)
WIDTH, HEIGHT, PAD = 720, 180, 36
#: Room on the left for the top value ('2.39 s').
LEFT = 56
#: The plotting area inside the axes.
INNER_W, INNER_H = WIDTH - LEFT - 8, HEIGHT - 2 * PAD


def read_series(queue: str, window: str) -> Series:
    """One window of a queue's counters: one script call (one more per further shard)."""
    ledger = get_ledger(queue)
    shards = getattr(ledger, "shard_count", 1)
    return Counters(ledger.redis, ledger_settings.namespace).read(queue, window, shards=shards)


#: The window as the sparkline's label names it.
_WINDOW_WORDS = {
    "hour": lambda: gettext("in the last hour"),
    "day": lambda: gettext("in the last day"),
    "week": lambda: gettext("in the last week"),
}


def window_of(value: str | None) -> str:
    return value if value in dict(WINDOW_CHOICES) else "hour"


def _label(start_ms: int, window: str) -> str:
    moment = timezone.localtime(ms_to_datetime(start_ms))
    return moment.strftime("%H:%M" if window == "hour" else "%a %H:%M")


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s" if value < 60 else duration_text(round(value * 1000))


def _figure(
    chart_id: str,
    title: str,
    svg: SafeString,
    head: Sequence[str],
    rows: list[list[str]],
    legend: SafeString,
) -> SafeString:
    table = format_html(
        '<details class="ledger-chart-table"><summary>{}</summary><table>'
        "<thead><tr>{}</tr></thead><tbody>{}</tbody></table></details>",
        gettext("Table"),
        format_html_join("", "<th>{}</th>", ((h,) for h in head)),
        format_html_join(
            "",
            "<tr>{}</tr>",
            ((format_html_join("", "<td>{}</td>", ((c,) for c in row)),) for row in rows),
        ),
    )
    return format_html(
        '<figure class="ledger-chart" id="{}"><figcaption>{}</figcaption>{}{}{}</figure>',
        chart_id,
        title,
        legend,
        svg,
        table,
    )


def _frame(title: str, unit: str, labels: list[str], body: str) -> SafeString:
    """The SVG around a chart's marks: axes, the top value, first and last times."""
    parts = [
        f'<svg class="ledger-svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'preserveAspectRatio="none" aria-label="{_esc(title)}"><title>{_esc(title)}</title>',
        f'<line class="axis" x1="{LEFT}" y1="{PAD + INNER_H}" x2="{WIDTH - 8}" '
        f'y2="{PAD + INNER_H}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{PAD}" x2="{LEFT}" y2="{PAD + INNER_H}"/>',
        f'<text class="tick" x="{LEFT - 4}" y="{PAD + 4}" text-anchor="end">{_esc(unit)}</text>',
        body,
    ]
    if labels:
        parts.append(
            f'<text class="tick" x="{LEFT}" y="{HEIGHT - 10}">{_esc(labels[0])}</text>'
            f'<text class="tick" x="{WIDTH - 8}" y="{HEIGHT - 10}" text-anchor="end">'
            f"{_esc(labels[-1])}</text>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every text in it went through _esc


def _esc(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def throughput_chart(series: Series) -> SafeString:
    """Completed and failed per bucket, stacked bars."""
    if series.bucket_seconds == 60:
        title = gettext("Throughput: completed and failed per minute")
    else:
        title = gettext("Throughput: completed and failed per hour")
    done = [b.counts["completed"] for b in series.buckets]
    failed = [b.counts["failed"] + b.counts["dead"] for b in series.buckets]
    top = max([d + f for d, f in zip(done, failed, strict=True)] + [1])
    step = INNER_W / len(done)
    marks = []
    for i, (d, f) in enumerate(zip(done, failed, strict=True)):
        x = LEFT + i * step + step * 0.1
        w = max(1.0, step * 0.8)
        hd, hf = INNER_H * d / top, INNER_H * f / top
        base = PAD + INNER_H
        if d:
            marks.append(
                f'<rect class="done" x="{x:.1f}" y="{base - hd:.1f}" width="{w:.1f}" '
                f'height="{hd:.1f}" data-value="{d}"/>'
            )
        if f:
            marks.append(
                f'<rect class="failed" x="{x:.1f}" y="{base - hd - hf:.1f}" width="{w:.1f}" '
                f'height="{hf:.1f}" data-value="{f}"/>'
            )
    labels = _labels(series)
    svg = _frame(title, str(top), labels, "".join(marks))
    rows = [
        [label, str(d), str(f)] for label, d, f in zip(labels, done, failed, strict=True) if d or f
    ]
    legend = _legend((("done", gettext("completed")), ("failed", gettext("failed"))))
    head = [gettext("Time"), gettext("Completed"), gettext("Failed")]
    return _figure("chart-throughput", title, svg, head, rows, legend)


#: The depth chart's lines: CSS class, what the legend and the table call it.
DEPTH_LINES = (
    ("due", gettext_lazy("Pending due")),
    ("claimed", gettext_lazy("Claimed")),
    ("dead", gettext_lazy("Dead")),
)


def depth_chart(series: Series) -> SafeString:
    """Pending due, claimed and dead per bucket (the most a sample saw), three lines.

    A bucket no worker sampled has no point: its lines break there, and the table
    leaves it out; an empty queue that was sampled draws zeros.
    """
    if series.bucket_seconds == 60:
        title = gettext("Depth: pending due, claimed and dead (the most sampled each minute)")
    else:
        title = gettext("Depth: pending due, claimed and dead (the most sampled each hour)")
    depth = series.depth or [None] * len(series.starts)
    top = max([v for d in depth if d is not None for v in (d.due, d.claimed, d.dead)] + [1])
    step = INNER_W / max(1, len(depth) - 1)
    marks = []
    for css, _ in DEPTH_LINES:
        runs: list[list[str]] = [[]]
        for i, d in enumerate(depth):
            if d is None:
                if runs[-1]:
                    runs.append([])
                continue
            value = getattr(d, css)
            runs[-1].append(f"{LEFT + i * step:.1f},{PAD + INNER_H - INNER_H * value / top:.1f}")
        for points in (r for r in runs if r):
            if len(points) > 1:
                marks.append(f'<polyline class="{css}" points="{" ".join(points)}"/>')
            marks.append(_dot(css, points[-1]))  # a lone sample is seen too
    labels = _labels(series)
    svg = _frame(title, str(top), labels, "".join(marks))
    rows = [
        [label, str(d.due), str(d.claimed), str(d.dead), str(d.pending)]
        for label, d in zip(labels, depth, strict=True)
        if d is not None
    ]
    latest = next((d for d in reversed(depth) if d is not None), None)
    legend = _legend(
        DEPTH_LINES,
        ""
        if latest is None
        else format_html(
            " {}",
            gettext("(last sample: %(due)s due, %(claimed)s claimed, %(dead)s dead)")
            % {"due": latest.due, "claimed": latest.claimed, "dead": latest.dead},
        ),
    )
    head = [
        gettext("Time"),
        gettext("Pending due"),
        gettext("Claimed"),
        gettext("Dead"),
        gettext("Pending (due and later)"),
    ]
    return _figure("chart-depth", title, svg, head, rows, legend)


def line_chart(series: Series, kind: str) -> SafeString:
    """The p50 and p95 of ``kind`` (``run`` or ``wait``) time per bucket, two lines."""
    if kind == "run":
        title = gettext("Run time: p50 and p95")
    else:
        title = gettext("Wait time (due to start): p50 and p95")
    p50 = [b.quantiles()[f"{kind}_p50"] for b in series.buckets]
    p95 = [b.quantiles()[f"{kind}_p95"] for b in series.buckets]
    top = max([v for v in p95 if v is not None] + [0.001])
    step = INNER_W / max(1, len(p50) - 1)
    marks = []
    for css, values in (("p50", p50), ("p95", p95)):
        points = [
            f"{LEFT + i * step:.1f},{PAD + INNER_H - INNER_H * v / top:.1f}"
            for i, v in enumerate(values)
            if v is not None
        ]
        if points:
            marks.append(f'<polyline class="{css}" points="{" ".join(points)}"/>')
            marks.extend(_dot(css, point) for point in points)
    labels = _labels(series)
    svg = _frame(title, _seconds(top), labels, "".join(marks))
    rows = [
        [label, _seconds(a), _seconds(b)]
        for label, a, b in zip(labels, p50, p95, strict=True)
        if a is not None
    ]
    legend = _legend((("p50", "p50"), ("p95", "p95")))
    return _figure(f"chart-{kind}", title, svg, [gettext("Time"), "p50", "p95"], rows, legend)


def _legend(series: Sequence[tuple[str, Any]], note: SafeString | str = "") -> SafeString:
    """A chart's own legend: a coloured square and a name for each of its series, a note."""
    return format_html(
        '<p class="ledger-legend">{}{}</p>',
        format_html_join(" · ", '<span class="{}">&#9632; {}</span>', series),
        note,
    )


def _labels(series: Series) -> list[str]:
    """Each bucket's start, as the chart's times and its table say it."""
    return [_label(start, series.window) for start in series.starts]


def _dot(css: str, point: str) -> str:
    """A sample's mark at ``point`` (``'x,y'``)."""
    x, y = point.split(",")
    return f'<circle class="{css}" cx="{x}" cy="{y}" r="2"/>'


def sparkline(series: Series) -> SafeString:
    """Attempts ended per minute over the window: a small line, its total as text."""
    values = [b.runs for b in series.buckets]
    top = max([*values, 1])
    w, h = 120, 24
    step = w / max(1, len(values) - 1)
    points = " ".join(
        f"{i * step:.1f},{h - 2 - (h - 4) * v / top:.1f}" for i, v in enumerate(values)
    )
    total = sum(values)
    label = ngettext(
        "%(total)s attempt ended %(window)s, at most %(top)s a bucket",
        "%(total)s attempts ended %(window)s, at most %(top)s a bucket",
        total,
    ) % {
        "total": total,
        "window": _WINDOW_WORDS.get(series.window, lambda: f"in the last {series.window}")(),
        "top": top,
    }
    return format_html(
        '<svg class="ledger-spark" viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
        'aria-label="{}"><title>{}</title><polyline points="{}"/></svg>',
        w,
        h,
        w,
        h,
        label,
        label,
        points,
    )


def task_rows(series_list: list[Series], records_url: str) -> list[dict[str, Any]]:
    """One row per queue and task over the window: runs, failure rate, run times."""
    from urllib.parse import urlencode

    rows = []
    for series in series_list:
        errors = series.errors_since()
        for name, stat in series.tasks().items():
            error = errors.get(name)
            q = stat.quantiles()
            rate = stat.failure_rate
            rows.append(
                {
                    "queue": series.queue,
                    "name": name,
                    "runs": stat.runs,
                    "completed": stat.counts["completed"],
                    "failed": stat.counts["failed"] + stat.counts["dead"],
                    "retried": stat.counts["retry"],
                    "failure_rate": "-" if rate is None else f"{rate:.1%}",
                    "run_p50": _seconds(q["run_p50"]),
                    "run_p95": _seconds(q["run_p95"]),
                    "wait_p95": _seconds(q["wait_p95"]),
                    "url": records_url + "?" + urlencode({"queue": series.queue, "task": name}),
                    "error_class": error.error_class if error else "",
                    "error_line": error.line if error else "",
                    "error_at_text": _local(error.at_ms) if error else "",
                }
            )
    return sorted(rows, key=lambda row: (-row["runs"], row["queue"], row["name"]))


def _local(ms: int) -> str:
    """An epoch-ms instant in the user's time zone, to the second."""
    return timezone.localtime(ms_to_datetime(ms)).strftime("%Y-%m-%d %H:%M:%S %Z")
