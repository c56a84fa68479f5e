"""Scores broken down where the data allows: by HotpotQA's question type and level, and by how each
question ended, with counts and 95% intervals (`stats.interval`). (FEVER's labels have their own table,
`tasks.fever.label_table`.)"""

import re

from rawreact.core.stats import RESAMPLES, SHARES, how_drawn, score_interval
from rawreact.core.tasks import QA, TaskType, of_records
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
    """The scores the records' task type declares (EM and F1, or success and reward), each with its interval,
    over the scored records."""
    task = of_records(records)
    scored = [r for r in records if task.scored(r)]
    if not scored:
        return {"scored": "0"} | {score.label: "-" for score in task.scores}
    cells = {"scored": str(len(scored))}
    for score in task.scores:  # "mean [low, high]"; a reward not known counts 0
        values = [r.get(score.key) or 0.0 for r in scored]
        found = score_interval(score.key, values, resamples=resamples, seed=seed)
        # One value has no spread to resample: the bootstrap's [x, x] would read as certainty.
        cells[score.label] = (
            f"{found.mean:.3f} (one: no interval)" if len(values) == 1 and score.key not in SHARES else str(found)
        )
    return cells


def breakdown_note(rows: list[dict[str, str]], task: TaskType = QA) -> str:
    """What the breakdown table holds, in one sentence."""
    kinds = sorted({row["by"] for row in rows}, key=list(GROUPS).index)
    said = f"Scores by {', '.join(kinds)}: {plural(len(rows), 'group')}, each with its own 95% interval"
    return said + f" ({how_drawn(task)})."
