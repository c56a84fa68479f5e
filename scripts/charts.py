"""Draw the benchmarks page's charts from the benchmarks' own output (their `--json` files).

    python scripts/charts.py [--results benchmarks/results] [--out docs/img]

- `cpu-by-setting.svg`, from `peer.json` (`benchmarks/throughput.py ... --json`): CPU seconds a question of
  each setting (the median over its rounds): the plain llama-cpp-python loop, the engine with W workers and
  llama-server with W slots, with the ratio to the plain loop and the wall seconds beside each bar.
- `wall-under-load.svg`, from `busy.json` (`benchmarks/busy.py ... --json`): wall seconds a question of each
  thread policy, idle and with a burner process on every core.
- `reflexion-by-trial.svg`, from the ledger `hotpotqa-qwen.kept.jsonl` (`benchmarks/paper_table.py --methods
  reflexion --keep ...`): the share of the questions kept solved after each of Reflexion's trials, with Wilson's
  95% interval, beside the first trial (ReAct alone) held flat: the shape of the Reflexion paper's figure.

Each chart names its machine, date and command. Plain SVG, written by this script: no plotting library.
"""

import argparse
import json
import math
import re
import statistics
import sys
import textwrap
from html import escape
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import kept  # noqa: E402  (benchmarks/kept.py, the ledgers' reader)

from rawreact.core.stats import wilson  # noqa: E402

WIDTH, ROW, LEFT, RIGHT = 760, 30, 160, 150
NOTE = 118  # characters of a note's line at 11 px
COLOURS = {"plain": "#9e9e9e", "engine": "#3f51b5", "server": "#ef6c00", "idle": "#3f51b5", "busy": "#c62828"}
FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif"'
TEXT = f'{FONT} font-size="13" fill="#212121"'


def _svg(title: str, note: str, body: list[str], height: int) -> str:
    lines = [part for line in note.split("\n") for part in textwrap.wrap(line, NOTE)]
    height += 14 * (len(lines) - 2)
    top = height - 12 - 14 * (len(lines) - 1)  # the note's first line
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
            f'height="{height}" role="img" aria-label="{escape(title)}">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
            f'<text x="12" y="22" {FONT} font-size="15" font-weight="600" fill="#212121">{escape(title)}</text>',
            *body,
            *(
                f'<text x="12" y="{top + 14 * k}" {FONT} font-size="11" fill="#616161">{escape(line)}</text>'
                for k, line in enumerate(lines)
            ),
            "</svg>",
            "",
        ]
    )


def _bar(y: int, label: str, value: float, scale: float, colour: str, said: str) -> list[str]:
    length = max(1.0, value * scale)
    return [
        f'<text x="{LEFT - 8}" y="{y + 17}" {TEXT} text-anchor="end">{escape(label)}</text>',
        f'<rect x="{LEFT}" y="{y + 4}" width="{length:.1f}" height="{ROW - 10}" rx="2" fill="{colour}"/>',
        f'<text x="{LEFT + length + 6:.1f}" y="{y + 17}" {TEXT}>{escape(said)}</text>',
    ]


def cpu_by_setting(found: dict) -> str:
    """Horizontal bars: each setting's median CPU seconds a question, its ratio to plain and its wall seconds."""
    rows = found["rows"]
    median = {name: statistics.median(r["cpu"] for r in got) for name, got in rows.items()}
    wall = {name: statistics.median(r["wall"] for r in got) for name, got in rows.items()}
    plain = median["plain"]
    names = sorted(median, key=lambda n: (n.split()[0] != "plain", n.split()[0], int(n.split()[1]) if " " in n else 0))
    scale = (WIDTH - LEFT - RIGHT) / max(median.values())
    body, y = [], 40
    for name in names:
        ratio = "" if name == "plain" else f", {plain / median[name]:.2f}x fewer than plain"
        label = {"plain": "plain loop"}.get(
            name, name.replace("engine", "engine, W =").replace("server", "llama-server, W =")
        )
        said = f"{median[name]:.2f} CPU s{ratio} (wall {wall[name]:.2f} s)"
        body += _bar(y, label, median[name], scale * 0.55, COLOURS[name.split()[0]], said)
        y += ROW
    title = f"CPU seconds a question, {found['questions']} shared HotpotQA questions, Gemma 3 270M greedy"
    rounds = max(len(got) for got in rows.values())
    machine = f"{found['cpu']}, {found['cores']} cores, {found['threads']} llama.cpp thread(s) a process"
    note = f"{machine}; {found['date']}; median of {rounds} rounds\npython {_command(found)}"
    return _svg(title, note, body, y + 44)


def wall_under_load(found: dict) -> str:
    """Pairs of bars: each policy's wall seconds a question idle and with every core burned."""
    rows = found["rows"]
    policies = list(dict.fromkeys(r["setting"] for r in rows))
    per = {}
    for name in policies:
        for burned in (False, True):
            got = [r for r in rows if r["setting"] == name and r["burned"] == burned]
            per[name, burned] = sum(r["wall"] for r in got) / max(sum(r["done"] for r in got), 1)
    scale = (WIDTH - LEFT - RIGHT) / max(per.values())
    body, y = [], 40
    for name in policies:
        idle, busy = per[name, False], per[name, True]
        label = {"every core": "every core (default)", "auto": "--threads auto"}.get(name, name)
        body += _bar(y, label, idle, scale * 0.8, COLOURS["idle"], f"idle {idle:.1f} s")
        body += _bar(y + ROW - 6, "", busy, scale * 0.8, COLOURS["busy"], f"busy {busy:.1f} s ({busy / idle:.1f}x)")
        y += 2 * ROW + 4
    title = f"Wall seconds a question, idle and with a burner on every core ({found['questions']} questions)"
    note = f"{found['cpu']}, {found['cores']} cores; {found['date']}\npython {_command(found)}"
    return _svg(title, note, body, y + 40)


def reflexion_by_trial(ledger: Path, row: str = "reflexion") -> str:
    """Reflexion's figure from a ledger: the share solved after each trial with its interval, a line and dots, and
    the first trial's share held flat (what ReAct alone, with no retries, solves)."""
    n, curve = kept.trial_curve(ledger, row)
    shares = [wilson(t["solved"], n) for t in curve]
    top = math.ceil(max(s.high for s in shares) * 10 + 0.5) / 10
    x0, x1, y0, y1 = 70, WIDTH - 270, 76, 276

    def at(trial: float, share: float) -> tuple[float, float]:
        return x0 + (x1 - x0) * (trial - 1) / max(len(curve) - 1, 1), y1 - (y1 - y0) * share / top

    grey, blue, flat = "#9e9e9e", COLOURS["engine"], COLOURS["server"]
    body = []
    for k in range(round(top * 10) + 1):  # a grid line and label every 0.1
        _, y = at(1, k / 10)
        body.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        body.append(f'<text x="{x0 - 8}" y="{y + 4:.1f}" {TEXT} text-anchor="end">{k / 10:.1f}</text>')
    for t in curve:
        x, _ = at(t["trial"], 0)
        body.append(f'<text x="{x:.1f}" y="{y1 + 18}" {TEXT} text-anchor="middle">{t["trial"]}</text>')
    body.append(f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="{grey}"/>')
    body.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{y1 + 36}" {TEXT} text-anchor="middle">trial</text>')
    body.append(f'<text x="12" y="{y0 - 24}" {TEXT}>share of the {n} questions solved (EM)</text>')
    (fx0, fy), (fx1, _) = at(1, shares[0].mean), at(len(curve), shares[0].mean)
    body.append(f'<line x1="{fx0:.1f}" y1="{fy:.1f}" x2="{fx1:.1f}" y2="{fy:.1f}" stroke="{flat}" stroke-width="2" '
                'stroke-dasharray="6 4"/>')  # fmt: skip
    points = [at(t["trial"], s.mean) for t, s in zip(curve, shares, strict=True)]
    body.append(f'<polyline points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in points)}" fill="none" '
                f'stroke="{blue}" stroke-width="2"/>')  # fmt: skip
    for t, s, (x, y) in zip(curve, shares, points, strict=True):
        _, low = at(1, s.low)
        _, high = at(1, s.high)
        body.append(
            f'<line x1="{x:.1f}" y1="{low:.1f}" x2="{x:.1f}" y2="{high:.1f}" stroke="{blue}" stroke-width="1"/>'
        )
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{blue}"><title>trial {t["trial"]}: {s}, '
                    f'{t["passed"]} of {t["reached"]} passed in it</title></circle>')  # fmt: skip
        body.append(f'<text x="{x + 7:.1f}" y="{y - 6:.1f}" {TEXT}>{s.mean:.3f}</text>')
    lx = x1 + 60
    for k, (colour, dash, words) in enumerate(
        [
            (blue, "", f"ReAct + Reflexion, {len(curve)} trials"),
            (flat, ' stroke-dasharray="6 4"', "ReAct alone (trial 1)"),
        ]
    ):
        ly = y0 + 10 + 22 * k
        body.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>')
        body.append(f'<text x="{lx + 30}" y="{ly + 4}" {TEXT}>{escape(words)}</text>')
    body.append(f'<text x="{lx}" y="{y0 + 58}" {TEXT}>bars: 95% interval (Wilson)</text>')
    outcomes, sittings = kept.read(ledger)
    cpus = sorted({e["cpu_name"] for (name, _), e in outcomes.items() if name == row and e.get("trials")})
    dates = sorted(s["date"][:10] for s in sittings if s.get("method") == row)
    gained = sum(t["passed"] for t in curve[1:])
    title = f"Reflexion by trial: Qwen2.5-Coder-1.5B-Instruct, {n} shared HotpotQA questions"
    note = (
        f"{'; '.join(cpus)}; one llama.cpp thread a process; sittings {dates[0]} to {dates[-1]}\n"
        f"The oracle evaluator (exact match): a question is tried again only while its answer is wrong, so later "
        f"trials can only gain ({gained} did).\n"
        f"python benchmarks/paper_table.py --reference ReAct --model qwen2.5-coder-1.5b --threads 1 --methods "
        f"reflexion --keep benchmarks/results/{ledger.name}"
    )
    return _svg(title, note, body, y1 + 60 + 28)


def _command(found: dict) -> str:
    """The benchmark's command line, its question file's path shown as FILE."""
    return re.sub(r" --json \S+", "", re.sub(r"--data \S+", "--data FILE", found["command"]))


CHARTS = {
    "cpu-by-setting.svg": ("peer.json", lambda path: cpu_by_setting(json.loads(path.read_text()))),
    "wall-under-load.svg": ("busy.json", lambda path: wall_under_load(json.loads(path.read_text()))),
    "reflexion-by-trial.svg": ("hotpotqa-qwen.kept.jsonl", reflexion_by_trial),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="benchmarks/results", help="the folder of the benchmarks' --json files")
    parser.add_argument("--out", default="docs/img", help="where the charts go")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, (source, draw) in CHARTS.items():
        path = Path(args.results) / source
        if not path.is_file():
            print(f"charts: no {path}; run the benchmark its chart needs with --json {path}", file=sys.stderr)
            return 2
        (out / name).write_text(draw(path))
        print(f"wrote {out / name} from {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
