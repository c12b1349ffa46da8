"""Small SVG charts for docs/results.md (no plotting library: the page is made on the
test machine, and these are all it needs): lines over x, grouped bars, and a schedule
as a Gantt chart."""

import math
from html import escape

W, H = 560, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 30, 44
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"]


def _frame(title, xlabel, ylabel, body, legend):
    items = "".join(
        f'<rect x="{W - RIGHT + 12}" y="{TOP + 18 * i}" width="12" height="12" fill="{c}"/>'
        f'<text x="{W - RIGHT + 30}" y="{TOP + 18 * i + 10}">{escape(n)}</text>'
        for i, (n, c) in enumerate(legend))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">'
            f'<rect width="{W}" height="{H}" fill="white"/>'
            f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>'
            f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" text-anchor="middle">{escape(xlabel)}</text>'
            f'<text transform="translate(14,{(TOP + H - BOTTOM) / 2}) rotate(-90)" '
            f'text-anchor="middle">{escape(ylabel)}</text>{body}{items}</svg>\n')


def _ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    t = math.floor(lo / step) * step
    out = []
    while t <= hi + step * 1e-9:
        out.append(round(t, 10))
        t += step
    return out


def _axes(xs, ys, logx):
    """Scales (functions to pixels) and the axes' SVG for the data ranges."""
    fx = (lambda v: math.log10(v)) if logx else (lambda v: v)
    x0, x1 = min(fx(x) for x in xs), max(fx(x) for x in xs)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    yt = _ticks(min(0, min(ys)), max(ys) * 1.05 if max(ys) > 0 else 1)
    y0, y1 = yt[0], yt[-1]
    px = lambda v: LEFT + (fx(v) - x0) / (x1 - x0) * (W - LEFT - RIGHT)
    py = lambda v: H - BOTTOM - (v - y0) / (y1 - y0) * (H - TOP - BOTTOM)
    svg = f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>'
    svg += f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="black"/>'
    for t in yt:
        svg += (f'<line x1="{LEFT - 4}" y1="{py(t):.1f}" x2="{W - RIGHT}" y2="{py(t):.1f}" '
                f'stroke="#ddd"/><text x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for x in sorted(set(xs)):
        svg += f'<text x="{px(x):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{x:g}</text>'
    return px, py, svg


def lines(title, xlabel, ylabel, series, logx=False, hlines=()):
    """`series`: {name: [(x, y), ...]}; `hlines`: [(name, y)] drawn dashed."""
    pts = [p for s in series.values() for p in s if p[1] is not None]
    if not pts:
        return None
    ys = [p[1] for p in pts] + [y for _, y in hlines]
    px, py, body = _axes([p[0] for p in pts], ys, logx)
    legend = []
    for i, (name, s) in enumerate(series.items()):
        c = COLORS[i % len(COLORS)]
        s = [p for p in s if p[1] is not None]
        body += ('<polyline fill="none" stroke-width="2" stroke="%s" points="%s"/>' %
                 (c, " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s)))
        body += "".join(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>' for x, y in s)
        legend.append((name, c))
    for j, (name, y) in enumerate(hlines):
        c = COLORS[(len(series) + j) % len(COLORS)]
        body += (f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{W - RIGHT}" y2="{py(y):.1f}" '
                 f'stroke="{c}" stroke-dasharray="6,4"/>')
        legend.append((name, c))
    return _frame(title, xlabel, ylabel, body, legend)


def bars(title, ylabel, groups, series):
    """`groups`: labels along x; `series`: {name: [value per group]} (None: no bar)."""
    vals = [v for s in series.values() for v in s if v is not None]
    if not vals:
        return None
    yt = _ticks(0, max(vals) * 1.05)
    top = yt[-1]
    py = lambda v: H - BOTTOM - v / top * (H - TOP - BOTTOM)
    gw = (W - LEFT - RIGHT) / len(groups)
    bw = gw * 0.8 / len(series)
    body = f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>'
    for t in yt:
        body += (f'<line x1="{LEFT}" y1="{py(t):.1f}" x2="{W - RIGHT}" y2="{py(t):.1f}" stroke="#ddd"/>'
                 f'<text x="{LEFT - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    legend = []
    for i, (name, s) in enumerate(series.items()):
        c = COLORS[i % len(COLORS)]
        legend.append((name, c))
        for g, v in enumerate(s):
            if v is None:
                continue
            x = LEFT + g * gw + gw * 0.1 + i * bw
            body += (f'<rect x="{x:.1f}" y="{py(v):.1f}" width="{bw:.1f}" '
                     f'height="{H - BOTTOM - py(v):.1f}" fill="{c}"/>')
    for g, label in enumerate(groups):
        body += (f'<text x="{LEFT + (g + 0.5) * gw:.1f}" y="{H - BOTTOM + 14}" '
                 f'text-anchor="middle">{escape(str(label))}</text>')
    return _frame(title, "", ylabel, body, legend)


def gantt(title, xlabel, rows, marks=()):
    """`rows`: [(label, [(start, end), ...])]; `marks`: [(label, x)] as vertical lines."""
    ends = [b for _, segs in rows for _, b in segs] + [x for _, x in marks]
    if not ends:
        return None
    x1 = max(ends)
    px = lambda v: LEFT + v / x1 * (W - LEFT - RIGHT)
    rh = (H - TOP - BOTTOM) / max(1, len(rows))
    body = ""
    legend = []
    for i, (label, segs) in enumerate(rows):
        c = COLORS[i % len(COLORS)]
        legend.append((label, c))
        y = TOP + i * rh + rh * 0.2
        for a, b in segs:
            body += (f'<rect x="{px(a):.1f}" y="{y:.1f}" width="{max(1, px(b) - px(a)):.1f}" '
                     f'height="{rh * 0.6:.1f}" fill="{c}"/>')
    for t in _ticks(0, x1, 10):
        body += f'<text x="{px(t):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{t:g}</text>'
    for label, x in marks:
        body += (f'<line x1="{px(x):.1f}" y1="{TOP}" x2="{px(x):.1f}" y2="{H - BOTTOM}" '
                 f'stroke="black" stroke-dasharray="3,3"/><text x="{px(x) + 2:.1f}" '
                 f'y="{TOP - 4}">{escape(label)}</text>')
    return _frame(title, xlabel, "", body, legend)
