"""Small charts as inline SVG text, for the HTML report: intervals, bars, stacked shares, a histogram.

Every label is escaped here, so a caller may pass run names and other text from data as they are.
Sizes are in CSS pixels; each chart sets its own width and height and scales with its container.
"""

import math
from html import escape

# Colours that stay apart for the colour-blind (Okabe and Ito's palette), in the order series take them.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")
LABEL = 150  # the width of the label column of the horizontal charts
WIDTH = 480
ROW = 22


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}>{escape(text)}</text>'


# How many characters of a run's name fit the label column at the charts' 11 px (about 6.2 px a character).
LABEL_CHARS = int((LABEL - 12) / 6.2)


def _row_label(y: float, label: str) -> str:
    """A row's name, right-aligned in the label column: a name too long for it keeps its end (where run files
    differ, as in `...-grammar.jsonl`) after an ellipsis, and the whole name is its tooltip."""
    shown = label if len(label) <= LABEL_CHARS else "…" + label[-(LABEL_CHARS - 1) :]
    text = _text(LABEL - 8, y, shown, "end")
    return text if shown == label else text.replace("</text>", f"<title>{escape(label)}</title></text>")


def _axis(x0: float, x1: float, y: float, top: float, ticks: list[float], scale, form: str) -> list[str]:
    """A horizontal axis at `y` with grid lines up to `top` at each tick."""
    out = [f'<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" class="axis"/>']
    for t in ticks:
        x = scale(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{y}" class="grid"/>')
        out.append(_text(x, y + 14, form.format(t), "middle", "tick"))
    return out


def _ticks(high: float, n: int = 4) -> list[float]:
    """About `n` round tick values from 0 to at least `high`."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / n
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [round(step * k, 10) for k in range(int(high / step + 0.999) + 1)]


def intervals(title: str, rows: list[tuple[str, float, float, float]], high: float = 1.0) -> str:
    """Each row's mean as a dot and its interval as a line: rows of (label, mean, low, high)."""
    height = 30 + ROW * len(rows) + 24
    x0, x1 = LABEL, WIDTH - 12

    def scale(v: float) -> float:
        return x0 + (x1 - x0) * v / high

    body = [_text(0, 16, title, cls="heading")]
    for k, (label, mean, low, up) in enumerate(rows):
        y = 30 + ROW * k + ROW / 2
        colour = PALETTE[k % len(PALETTE)]
        body.append(_row_label(y + 4, label))
        body.append(
            f'<line x1="{scale(low):.1f}" y1="{y}" x2="{scale(up):.1f}" y2="{y}" stroke="{colour}" stroke-width="2"/>'
        )
        body.append(
            f'<circle cx="{scale(mean):.1f}" cy="{y}" r="4" fill="{colour}"><title>{escape(label)}: '
            f"{mean:.3f} [{low:.3f}, {up:.3f}]</title></circle>"
        )
    y_axis = 30 + ROW * len(rows)
    body += _axis(x0, x1, y_axis, 26, [high * k / 4 for k in range(5)], scale, "{:.2f}")
    return _svg(WIDTH, height, title, body)


def bars(title: str, rows: list[tuple[str, float]], form: str = "{:.1f}") -> str:
    """One horizontal bar per row of (label, value), its value written at its end."""
    height = 30 + ROW * len(rows) + 24
    x0, x1 = LABEL, WIDTH - 60
    ticks = _ticks(max((v for _, v in rows), default=0.0))

    def scale(v: float) -> float:
        return x0 + (x1 - x0) * v / ticks[-1]

    body = [_text(0, 16, title, cls="heading")]
    for k, (label, value) in enumerate(rows):
        y = 30 + ROW * k
        body.append(_row_label(y + ROW / 2 + 4, label))
        body.append(
            f'<rect x="{x0}" y="{y + 3}" width="{scale(value) - x0:.1f}" height="{ROW - 6}" '
            f'fill="{PALETTE[k % len(PALETTE)]}"/>'
        )
        body.append(_text(scale(value) + 4, y + ROW / 2 + 4, form.format(value), cls="value"))
    body += _axis(x0, x1, 30 + ROW * len(rows), 26, ticks, scale, "{:g}")
    return _svg(WIDTH, height, title, body)


def shares(title: str, rows: list[tuple[str, dict[str, int]]], colours: dict[str, str]) -> str:
    """One bar per row of (label, {part: count}), split into the parts' shares, with a legend."""
    parts = [p for p in colours if any(counts.get(p) for _, counts in rows)]
    height = 30 + ROW * len(rows) + 30
    x0, x1 = LABEL, WIDTH - 12
    body = [_text(0, 16, title, cls="heading")]
    for k, (label, counts) in enumerate(rows):
        y, total, x = 30 + ROW * k, sum(counts.values()) or 1, float(x0)
        body.append(_row_label(y + ROW / 2 + 4, label))
        for part in parts:
            width = (x1 - x0) * counts.get(part, 0) / total
            if width:
                body.append(
                    f'<rect x="{x:.1f}" y="{y + 3}" width="{width:.1f}" height="{ROW - 6}" fill="{colours[part]}">'
                    f"<title>{escape(label)}: {escape(part)} {counts[part]}</title></rect>"
                )
            x += width
    x, y = float(x0), 30 + ROW * len(rows) + 14
    for part in parts:  # the legend, one swatch and name a part
        body.append(f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" fill="{colours[part]}"/>')
        body.append(_text(x + 14, y, part, cls="tick"))
        x += 22 + 7 * len(part)
    return _svg(WIDTH, height, title, body)


def histogram(title: str, series: list[tuple[str, dict[int, int]]], names: list[str] | None = None) -> str:
    """Counts by a whole number (such as steps per question), one bar per series in each group; `names`,
    if given, labels the groups 0, 1, ... instead of their numbers (the bins of a binned value)."""
    values = sorted({v for _, counts in series for v in counts}) or [0]
    groups = list(range(len(names))) if names else list(range(min(values), max(values) + 1))
    top = max((c for _, counts in series for c in counts.values()), default=1)
    height, x0, y0, y1 = 220, 36, 30, 180
    band = (WIDTH - x0 - 8) / len(groups)
    bar = min(band * 0.8 / max(len(series), 1), 40.0)
    ticks = _ticks(top)

    def scale(v: float) -> float:
        return y1 - (y1 - y0) * v / ticks[-1]

    body = [_text(0, 16, title, cls="heading")]
    for t in ticks:
        body.append(f'<line x1="{x0}" y1="{scale(t):.1f}" x2="{WIDTH - 8}" y2="{scale(t):.1f}" class="grid"/>')
        body.append(_text(x0 - 4, scale(t) + 4, f"{t:g}", "end", "tick"))
    for g, value in enumerate(groups):
        left = x0 + band * g + (band - bar * len(series)) / 2
        for k, (label, counts) in enumerate(series):
            count = counts.get(value, 0)
            body.append(
                f'<rect x="{left + bar * k:.1f}" y="{scale(count):.1f}" width="{bar:.1f}" '
                f'height="{y1 - scale(count):.1f}" fill="{PALETTE[k % len(PALETTE)]}">'
                f"<title>{escape(label)}: {count} with {escape(names[value] if names else str(value))}</title></rect>"
            )
        body.append(_text(x0 + band * (g + 0.5), y1 + 14, names[value] if names else str(value), "middle", "tick"))
    body.append(f'<line x1="{x0}" y1="{y1}" x2="{WIDTH - 8}" y2="{y1}" class="axis"/>')
    x = float(x0)
    for k, (label, _) in enumerate(series):  # the legend
        body.append(f'<rect x="{x:.1f}" y="{height - 15}" width="10" height="10" fill="{PALETTE[k % len(PALETTE)]}"/>')
        body.append(_text(x + 14, height - 6, label, cls="tick"))
        x += 22 + 7 * len(label)
    return _svg(WIDTH, height, title, body)


def scatter(title: str, points: list[tuple[float, float, str]], x_label: str, y_label: str) -> str:
    """One dot per point (x, y from 0 to 1, and its label), with the diagonal where x equals y: for each
    question, one run's score against another's. Dots above the line are questions the second run did better."""
    size, pad = 300, 40
    span = size - 2 * pad
    heading = wrapped(title, 40)  # the square is narrow: a long title (two runs' names) takes more lines
    drop = 14 * (len(heading) - 1)

    def at(x: float, y: float) -> tuple[float, float]:
        return pad + span * x, drop + size - pad - span * y

    body = [_text(0, 16 + 14 * k, line, cls="heading") for k, line in enumerate(heading)]
    (x0, y0), (x1, y1) = at(0, 0), at(1, 1)
    body.append(f'<rect x="{x0}" y="{y1}" width="{span}" height="{span}" fill="none" stroke="#bbbbbb"/>')
    body.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" class="grid"/>')
    for tick in (0.0, 0.5, 1.0):
        tx, _ = at(tick, 0)
        _, ty = at(0, tick)
        body.append(_text(tx, y0 + 14, f"{tick:g}", "middle", "tick"))
        body.append(_text(x0 - 4, ty + 4, f"{tick:g}", "end", "tick"))
    body.append(_text((x0 + x1) / 2, drop + size - 6, x_label, "middle", "tick"))
    body.append(_text(4, y1 - 8, y_label, "start", "tick"))
    places: dict[tuple[float, float], list[str]] = {}
    for x, y, label in points:  # questions at the same place are one dot, larger, that says how many
        places.setdefault((round(x, 3), round(y, 3)), []).append(label)
    for (x, y), labels in places.items():
        cx, cy = at(x, y)
        n = len(labels)
        tip = f"{n} questions" if n > 1 else labels[0]
        body.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{3 + 2 * math.sqrt(n - 1):.1f}" fill="{PALETTE[0]}" '
            f'fill-opacity="0.6" data-n="{n}"><title>{escape(tip)}: {x:.2f}, {y:.2f}</title></circle>'
        )
    return _svg(size, size + drop, title, body)


def wrapped(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters, broken between words (a longer word keeps its line)."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def lines(title: str, series: list[tuple[str, list[tuple[int, float]]]], x_label: str, y_label: str) -> str:
    """One line per series of (x, y) points, x whole numbers from 1 and y from 0 to 1, with a dot at each point
    and a legend: the shape of the Reflexion paper's figure (the share solved after each trial, per strategy)."""
    xs = sorted({x for _, points in series for x, _ in points}) or [1]
    legend, x, row = [], 0.0, 0  # the legend's places, in rows that fit the width
    for label, _ in series:
        size = 22 + 7 * len(label)
        if x and x + size > WIDTH - 40:
            x, row = 0.0, row + 1
        legend.append((40 + x, row))
        x += size
    x0, x1, y0, y1 = 40, WIDTH - 12, 40, 200
    height = y1 + 44 + 16 * (row + 1)

    def at(x: float, y: float) -> tuple[float, float]:
        span = max(xs[-1] - xs[0], 1)
        return x0 + (x1 - x0) * (x - xs[0]) / span, y1 - (y1 - y0) * y

    body = [_text(0, 16, title, cls="heading"), _text(x0 - 4, y0 - 12, y_label, "end", "tick")]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        _, y = at(xs[0], tick)
        body.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" class="grid"/>')
        body.append(_text(x0 - 4, y + 4, f"{tick:g}", "end", "tick"))
    for tick in xs:
        px, _ = at(tick, 0)
        body.append(_text(px, y1 + 14, str(tick), "middle", "tick"))
    body.append(f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" class="axis"/>')
    body.append(_text((x0 + x1) / 2, y1 + 30, x_label, "middle", "tick"))
    for k, (label, points) in enumerate(series):
        colour = PALETTE[k % len(PALETTE)]
        placed = [at(px, py) for px, py in points]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in placed)
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" data-series="{k}"/>')
        for (px, py), (cx, cy) in zip(points, placed, strict=True):
            body.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{colour}" data-series="{k}" data-x="{px}" '
                f'data-y="{py:.4f}"><title>{escape(label)}: {py:.3f} after trial {px}</title></circle>'
            )
        lx, lrow = legend[k]
        ly = y1 + 40 + 16 * lrow
        body.append(f'<rect x="{lx:.1f}" y="{ly}" width="10" height="10" fill="{colour}"/>')
        body.append(_text(lx + 14, ly + 9, label, cls="tick"))
    return _svg(WIDTH, height, title, body)


def search_tree(title: str, nodes: list[dict], chosen: int, most: int = 160) -> str:
    """A LATS search as a tree: each node a circle, its depth its row, its children below it, coloured by its value
    (-1 red, 0 grey, 1 green), ringed when terminal (a finish: a thick ring, green when it scored); the path to the
    chosen node drawn thick; a rollout's nodes (made by a rollout, not kept in the tree) dashed. Each node's tooltip
    says its step, value, visits and reward. At most `most` nodes are drawn, the first made."""
    nodes = nodes[:most]
    by_id = {n["id"]: n for n in nodes}
    children: dict[int | None, list[dict]] = {}
    for node in nodes:
        if node["parent"] is None or node["parent"] in by_id:
            children.setdefault(node["parent"], []).append(node)
    x_of: dict[int, float] = {}

    def place(node: dict, left: float) -> float:  # leaves side by side; a parent above the middle of its children
        kids = children.get(node["id"], [])
        if not kids:
            x_of[node["id"]] = left
            return left + 1
        right = left
        for kid in kids:
            right = place(kid, right)
        x_of[node["id"]] = (x_of[kids[0]["id"]] + x_of[kids[-1]["id"]]) / 2
        return right

    roots = children.get(None, [])
    width_units = sum(place(root, 0) for root in roots[:1]) or 1
    step_x, step_y, pad = 18, 46, 24
    depth = max((n["depth"] for n in nodes if n["id"] in x_of), default=0)
    width, height = int(pad * 2 + step_x * max(width_units - 1, 1)), int(pad * 2 + step_y * depth + 14)
    on_path, node = set(), by_id.get(chosen)
    while node is not None:
        on_path.add(node["id"])
        node = by_id.get(node["parent"])

    def at(n: dict) -> tuple[float, float]:
        return pad + step_x * x_of[n["id"]], pad + step_y * n["depth"]

    body = []
    for n in nodes:
        if n["id"] in x_of and n["parent"] in x_of:
            (x1, y1), (x2, y2) = at(by_id[n["parent"]]), at(n)
            cls = "edge chosen" if n["id"] in on_path else "edge rollout" if n["rollout"] else "edge"
            body.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="{cls}"/>')
    for n in nodes:
        if n["id"] not in x_of:
            continue
        x, y = at(n)
        value = max(-1.0, min(1.0, float(n["value"])))
        colour = _mix("#999999", "#009e73" if value >= 0 else "#d55e00", abs(value))
        ring = "#009e73" if n["terminal"] and n["reward"] == 1 else "#222222" if n["terminal"] else colour
        cls = "node chosen" if n["id"] in on_path else "node rollout" if n["rollout"] else "node"
        said = (
            "the question"
            if n["parent"] is None
            else f"step {n['depth']}: {n['action'] or '(no action)'}; value {n['value']:.2f}, {n['visits']} visits"
            + (f", terminal, reward {n['reward']:g}" if n["terminal"] else "")
        )
        body.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{8 if n["id"] in on_path else 6}" fill="{colour}" stroke="{ring}" '
            f'stroke-width="{3 if n["terminal"] else 1}" class="{cls}" data-node="{n["id"]}"><title>{escape(said)}'
            "</title></circle>"
        )
    body.append(_text(pad, height - 4, f"{len(x_of)} nodes drawn; the chosen path thick", cls="tick"))
    return _svg(width, height, title, body)


def _mix(base: str, tint: str, share: float) -> str:
    """`base` moved `share` of the way to `tint`, as a #rrggbb colour."""
    a, b = (tuple(int(c[k : k + 2], 16) for k in (1, 3, 5)) for c in (base, tint))
    return "#" + "".join(f"{round(p + (q - p) * share):02x}" for p, q in zip(a, b, strict=True))
