"""Reflexion runs trial by trial: the score after each trial (the shape of the Reflexion paper's figure),
how many questions each trial ran and passed, and what each trial cost.

A question's answer after trial t is the answer of its last trial up to t: a question that passed at
trial 2 keeps that answer after trials 3, 4, ..., so with the `em` evaluator (the paper's oracle) the
EM after trial t is the share of questions solved by then, the paper's "proportion of solved tasks".
"""

from rawreact.reports.summary import score


def trial_stats(records: list[dict]) -> list[dict]:
    """Per trial (1, 2, ...) of a run's Reflexion records: questions that ran it and that passed it, EM and F1
    after it over the scored questions, and the calls and tokens of that trial (with the reflection written
    after it). Empty for a run without trials."""
    withtrials = [r for r in records if r.get("trials")]
    if not withtrials:
        return []
    most = max(len(r["trials"]) for r in withtrials)
    limit = max((r.get("reflexion") or {}).get("trials", 0) for r in withtrials)
    stats = []
    for t in range(1, max(most, limit) + 1):
        ran = [r["trials"][t - 1] for r in withtrials if len(r["trials"]) >= t]
        after = [r["trials"][min(t, len(r["trials"])) - 1] for r in withtrials]
        scored = [trial for trial in after if trial.get("em") is not None]
        games = [trial for trial in after if trial.get("success") is not None]  # a game's trials: success after
        evaluated = [trial.get("tokens", {}).get("evaluated") for trial in ran]
        stats.append(
            {
                "trial": t,
                "ran": len(ran),
                "passed": sum(bool(trial["passed"]) for trial in ran),
                "em": sum(trial["em"] for trial in scored) / len(scored) if scored else None,
                "f1": sum(trial["f1"] for trial in scored) / len(scored) if scored else None,
                "calls": sum(trial["model_calls"] for trial in ran),
                "completion_tokens": sum(trial.get("tokens", {}).get("completion", 0) for trial in ran),
                "evaluated_tokens": None if None in evaluated else sum(evaluated),
                "reflections": sum(trial.get("reflection") is not None for trial in ran),
                **({"success": sum(trial["success"] for trial in games) / len(games)} if games else {}),
            }
        )
    return stats


def trial_rows(runs: dict[str, list[dict]]) -> list[dict[str, str]]:
    """The table of `rawreact report` for the runs that have trials: a row per run and trial."""
    rows = []
    for name, records in runs.items():
        judged = {(r.get("reflexion") or {}).get("evaluator", "?") for r in records if r.get("trials")}
        for s in trial_stats(records):
            after = (
                {"success after": score(s["success"], "{:.3f}")}
                if "success" in s
                else {"EM after": score(s["em"], "{:.3f}"), "F1 after": score(s["f1"], "{:.3f}")}
            )
            rows.append(
                {
                    "run": name,
                    "trial": str(s["trial"]),
                    "ran": str(s["ran"]),
                    "passed": f"{s['passed']} ({'/'.join(sorted(judged))})",
                    **after,
                    "calls": str(s["calls"]),
                    "reflections": str(s["reflections"]),
                    "gen tok": str(s["completion_tokens"]),
                    "eval tok": "unknown" if s["evaluated_tokens"] is None else str(s["evaluated_tokens"]),
                }
            )
    return rows


TRIALS_NOTE = (
    "a row per trial of each Reflexion run: ran is the questions that reached the trial, passed those its "
    "evaluator passed (em: the gold answer, the paper's oracle; supported: no gold answer), EM and F1 after are "
    "over every scored question with the answer of its last trial so far, and calls and tokens are the trial's "
    "own, with the reflection written after it"
)
