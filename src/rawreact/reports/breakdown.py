"""Scores broken down where the data allows: by HotpotQA's question type and level, and by how each
question ended, with counts and 95% intervals (`stats.interval`). (FEVER's labels have their own table,
`tasks.fever.label_table`.)"""

import re

from rawreact.core.stats import RESAMPLES, score_interval
from rawreact.core.text import plural

# HotpotQA's kind is `type/level` (`bridge/hard`); a game's is its recipe, `kind:level` (`coin:2`).
GROUPS = {
    "type": lambda r: re.split("[/:]", r["kind"])[0] if r.get("kind") else None,
    "level": lambda r: re.split("[/:]", r["kind"])[1] if re.search("[/:]", r.get("kind", "")) else None,
    "ended": lambda r: r["ended"],
}


def breakdown(runs: dict[str, list[dict]], *, resamples: int = RESAMPLES, seed: int = 0) -> list[dict[str, str]]:
    """One row per run, grouping ("type", "level", "ended") and value: how many questions, how many
    scored, and EM and F1 over the scored ones with their intervals. A grouping is left out of a run
    whose records do not have it (no HotpotQA type), or where every question falls in one group."""
    rows = []
    for name, records in runs.items():
        for by, key in GROUPS.items():
            groups: dict[str, list[dict]] = {}
            for record in records:
                value = key(record)
                if value is not None:
                    groups.setdefault(value, []).append(record)
            if len(groups) < 2 or sum(map(len, groups.values())) < len(records):
                continue
            for value, found in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
                rows.append(
                    {"run": name, "by": by, "group": value, "n": str(len(found))} | _scores(found, resamples, seed)
                )
    return rows


def _scores(records: list[dict], resamples: int, seed: int) -> dict[str, str]:
    if all(r.get("task") == "game" for r in records):  # a game's scores: success and reward
        cells = {"scored": str(len(records))}
        for metric in ("success", "reward"):
            values = [r.get(metric) or 0.0 for r in records]
            cells[metric] = str(score_interval(metric, values, resamples=resamples, seed=seed))
        return cells
    scored = [r for r in records if r["em"] is not None]
    if not scored:
        return {"scored": "0", "EM": "-", "F1": "-"}
    cells = {"scored": str(len(scored))}
    for metric in ("em", "f1"):
        found = score_interval(metric, [r[metric] for r in scored], resamples=resamples, seed=seed)
        cells[metric.upper()] = str(found)  # "mean [low, high]"
    return cells


def breakdown_note(rows: list[dict[str, str]]) -> str:
    """What the breakdown table holds, in one sentence."""
    kinds = sorted({row["by"] for row in rows}, key=list(GROUPS).index)
    said = f"Scores by {', '.join(kinds)}: {plural(len(rows), 'group')}, each with its own 95% interval"
    return said + " (Wilson's for a share such as EM, the bootstrap for F1)."
