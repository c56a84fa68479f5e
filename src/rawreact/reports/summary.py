"""Summaries of run files, and tables of several runs side by side (plain text, Markdown, CSV),
with bootstrap intervals when the runs answered the same questions (`Comparison`).

One room: a summary's numbers and the table columns that show them (which columns a task type has: a question's,
a game's, a program's) are read together, so a new number and its column change in one place.
"""

import csv
import io
from collections import Counter

from rawreact.agents.guardrails import ENDINGS
from rawreact.config.choices import BACKOFFS
from rawreact.core.errors import DataError
from rawreact.core.stats import pass_at_k, wilson
from rawreact.core.tasks import PROGRAM, TaskType, of_records, task_type
from rawreact.core.text import plural


def summarize(records: list[dict]) -> dict:
    """Aggregate scores and costs over the result records of a run (means are per question)."""
    n = len(records)
    if n == 0:
        return {"questions": 0}

    def mean(key: str) -> float:
        return sum(r[key] for r in records) / n

    endings = _endings(records)
    scored = [r for r in records if r["em"] is not None]  # a question without a gold answer has no score
    # A task whose outcome the environment judges (a game) is scored by success and reward instead
    games = [r for r in records if task_type(r.get("task")).scoring == "outcome"]

    searches = sum(r.get("searches", 0) for r in records)
    evaluated = [r["tokens"].get("evaluated") for r in records]
    shares = [r["vote_share"] for r in records if r.get("vote_share") is not None]
    backoffs = [r for r in records if r.get("method") in BACKOFFS]
    methods = sorted({r.get("method", "react") for r in records})
    return {
        "questions": n,
        "scored": len(scored) + len(games),
        **_games(games),
        # Means over the scored questions; absent (shown "-") when no question had a gold answer.
        **(
            {"em": sum(r["em"] for r in scored) / len(scored), "f1": sum(r["f1"] for r in scored) / len(scored)}
            if scored
            else {}
        ),
        # The share that gave an answer by finish, over the questions that answer (a game ends won or lost instead)
        **_finished([r for r in records if task_type(r.get("task")).scoring != "outcome"]),
        "invalid_per_question": mean("invalid_actions"),
        "fallback_per_question": _known_mean(records, "fallback_calls"),
        "repeats_per_question": _known_mean(records, "repeats"),
        **_support(records),
        "endings": endings,
        "steps": mean("steps"),
        "calls": mean("model_calls"),
        "prompt_tokens": sum(r["tokens"]["prompt"] for r in records) / n,
        # None (unknown) where a backend did not say how much of the prompt it computed.
        "evaluated_tokens": None if None in evaluated else sum(evaluated) / n,
        "context_ended": endings.get("context", 0),
        "completion_tokens": sum(r["tokens"]["completion"] for r in records) / n,
        "seconds": mean("seconds"),
        "method": "+".join(methods),
        "loop": "+".join(sorted({_loop(r) for r in records})),
        # CoT-SC's mean vote share, and which part of a back-off answered: absent where they do not apply.
        **({"vote_share": sum(shares) / len(shares)} if shares else {}),
        **({"branches": _shares([r["branch"] for r in backoffs])} if backoffs else {}),
        **_throughput(records),
        # Absent (shown "-") when no question searched: Standard and CoT cannot.
        **({"search_hit_rate": sum(r.get("search_hits", 0) for r in records) / searches} if searches else {}),
    }


def _games(games: list[dict]) -> dict:
    """A game run's scores: the share of games won (`success`), the mean reward (the share of each game's
    points scored) and the invalid commands a step (commands the game did not admit, and lines that held
    none); absent when no record is a game."""
    if not games:
        return {}
    steps = sum(r["steps"] for r in games)
    rewards = [r["reward"] for r in games if r.get("reward") is not None]
    own = [r["score"] for r in games if r.get("score") is not None]  # an environment's own score (ScienceWorld's)
    return {
        **_pass_at(games),
        "games": len(games),
        "unit": task_type(games[0].get("task")).unit if len({r.get("task") for r in games}) == 1 else "game",
        **({"score": sum(own) / len(own)} if own else {}),
        "success": sum(r["success"] for r in games) / len(games),
        **({"reward": sum(rewards) / len(rewards)} if rewards else {}),
        "invalid_per_step": sum(r["invalid_actions"] for r in games) / steps if steps else 0.0,
    }


PASS_AT = (1, 2, 5, 10, 20, 50, 100)  # the k of pass@k a run of sampled programs reports, up to its samples


def _pass_at(problems: list[dict]) -> dict:
    """pass@k of sampled programs (--samples): Chen et al.'s estimator, the mean over problems; absent otherwise."""
    counts = [(r.get("program") or {}).get("samples") for r in problems]
    if not counts or None in counts:
        return {}
    n = min(c["n"] for c in counts)
    mean = {k: sum(pass_at_k(c["n"], c["passed"], k) for c in counts) / len(counts) for k in PASS_AT if k <= n}
    return {"pass_at": mean, "samples": n, "sample_temperature": counts[0]["temperature"]}


def _finished(answering: list[dict]) -> dict:
    return {"finished": sum(r["ended"] == "finish" for r in answering) / len(answering)} if answering else {}


def _throughput(records: list[dict]) -> dict:
    """Questions per minute of the run's wall time: the time covered by its questions, each from its start
    to its end, counted once where questions overlapped (under workers) and not between sessions (a
    resume). Absent when records written before their times were kept lack them."""
    spans = sorted((r["started"], r["finished"]) for r in records if "started" in r and "finished" in r)
    if not spans or len(spans) < len(records):
        return {}
    covered, (start, end) = 0.0, spans[0]
    for begin, finish in spans[1:]:
        if begin > end:
            covered, start = covered + end - start, begin
        end = max(end, finish)
    covered += end - start
    return {"wall_seconds": covered, "per_minute": 60 * len(spans) / covered if covered > 0 else None}


def _known_mean(records: list[dict], key: str) -> float | None:
    """The mean of a count per question; None (unknown) when records written before it was counted lack it."""
    return sum(r[key] for r in records) / len(records) if all(key in r for r in records) else None


def _support(records: list[dict]) -> dict:
    """The share of answers found in what the agent saw, and EM among those found and those not.

    Over the records that have a verdict (an answer from a method that searched); absent when none has.
    The EM shares count only the questions with a gold answer (a score).
    """
    judged = [r for r in records if r.get("supported") is not None]
    if not judged:
        return {}
    found = [r["em"] for r in judged if r["supported"] and r["em"] is not None]
    unseen = [r["em"] for r in judged if not r["supported"] and r["em"] is not None]
    return (
        {"supported": sum(bool(r["supported"]) for r in judged) / len(judged)}
        | ({"em_supported": sum(found) / len(found)} if found else {})
        | ({"em_unsupported": sum(unseen) / len(unseen)} if unseen else {})
    )


def _endings(records: list[dict]) -> dict[str, int]:
    """How many questions ended each way, in the order of ENDINGS (then any other value)."""
    counts = Counter(r["ended"] for r in records)
    return {e: counts[e] for e in [*ENDINGS, *sorted(set(counts) - set(ENDINGS))] if counts[e]}


def _endings_cell(summary: dict) -> str:
    return ", ".join(f"{e} {n}" for e, n in summary.get("endings", {}).items()) or "-"


def _loop(record: dict) -> str:
    """The loop that acted ("-" for none); a record written before there were two loops ran the tolerant one."""
    return record.get("loop") or ("tolerant" if record.get("trajectory") is not None else "-")


def _shares(branches: list[str]) -> dict[str, float]:
    """How often each branch answered, as shares, in the order the branches first answered."""
    return {b: branches.count(b) / len(branches) for b in dict.fromkeys(branches)}


def _branch_cell(summary: dict) -> str:
    branches = summary.get("branches")
    return "-" if not branches else " ".join(f"{b} {share:.0%}" for b, share in branches.items())


def summary_line(summary: dict) -> str:
    """One sentence a terminal can show at the end of a run."""
    if not summary["questions"]:
        return "0 questions"
    s = summary
    if "games" in s and s.get("unit") == PROGRAM.unit:
        return _programs_line(s)
    if "games" in s:
        return _games_line(s)
    evaluated = _cell(s, "evaluated_tokens", "{:.0f}")
    repeats = _cell(s, "repeats_per_question", "{:.2f}")
    support = f", {s['supported']:.0%} of answers seen in an observation" if "supported" in s else ""
    context = f", {s['context_ended']} ended by the context window" if s["context_ended"] else ""
    fallback = _cell(s, "fallback_per_question", "{:.2f}")
    unscored = s["questions"] - s["scored"]
    hits = f"{s['search_hit_rate']:.0%} of searches hit" if "search_hit_rate" in s else "no searches"
    rate = f" ({s['per_minute']:.1f} questions per minute of wall time)" if s.get("per_minute") else ""
    scores = (
        f"EM {s['em']:.3f}, F1 {s['f1']:.3f}" + (f" over {s['scored']} scored" if unscored else "")
        if "em" in s
        else "EM -, F1 - (no gold answers)"
    )
    return (
        f"{s['questions']} question{'s' if s['questions'] != 1 else ''}: {scores}, "
        f"finished {round(s['finished'] * s['questions'])}/{s['questions']}{context}, "
        f"{s['invalid_per_question']:.2f} invalid actions, {fallback} fallback calls, {s['steps']:.1f} steps, "
        f"{s['calls']:.1f} calls, "
        f"{s['completion_tokens']:.0f} generated and {evaluated} evaluated tokens, "
        f"{hits}, {repeats} repeats{support}, {s['seconds']:.1f} s per question{rate}; "
        f"ended: {_endings_cell(s)}"
    )


def _games_line(s: dict) -> str:
    """The end-of-run sentence of a game run: success, reward, steps, invalid commands and cost."""
    rate = f" ({s['per_minute']:.1f} games per minute of wall time)" if s.get("per_minute") else ""
    reward = _cell(s, "reward", "{:.3f}")
    unit, own = s.get("unit", "game"), f"score {s['score']:.1f}, " if "score" in s else ""
    rate = rate.replace(" games ", f" {unit}s ")
    return (
        f"{plural(s['games'], unit)}: {own}success {s['success']:.3f}, reward {reward}, {s['steps']:.1f} steps, "
        f"{s['invalid_per_step']:.2f} invalid commands a step, {s['calls']:.1f} calls, "
        f"{s['completion_tokens']:.0f} generated and {_cell(s, 'evaluated_tokens', '{:.0f}')} evaluated tokens, "
        f"{_cell(s, 'repeats_per_question', '{:.2f}')} repeats, {s['seconds']:.1f} s per {unit}{rate}; "
        f"ended: {_endings_cell(s)}"
    )


def _programs_line(s: dict) -> str:
    """The end-of-run sentence of a run of programs: pass@1 with its 95% interval (Wilson's), implementations,
    calls, tokens and time a problem."""
    n = s["games"]
    rate = f" ({s['per_minute']:.1f} problems per minute of wall time)" if s.get("per_minute") else ""
    return (
        f"{plural(n, 'problem')}: pass@1 {wilson(round(s['success'] * n), n)}, {s['steps']:.1f} "
        f"implementations, {s['calls']:.1f} calls, {s['completion_tokens']:.0f} generated and "
        f"{_cell(s, 'evaluated_tokens', '{:.0f}')} evaluated tokens, {s['seconds']:.1f} s per problem{rate}; "
        f"ended: {_endings_cell(s)}{_pass_at_said(s)}"
    )


def _pass_at_said(s: dict) -> str:
    """pass@k of a run of sampled programs, for its summary line; nothing for a run of one implementation each."""
    said = ", ".join(f"pass@{k} {value:.3f}" for k, value in s.get("pass_at", {}).items())
    at = f"; over {s.get('samples')} samples a problem at T {s.get('sample_temperature', 0):g} (Chen et al.'s "
    return f"{at}unbiased estimator): {said}" if said else ""


def context_warning(summary: dict, n_ctx: int | None = None) -> str | None:
    """A warning when most questions ended because the prompt outgrew the context window, else None."""
    ended, n = summary.get("context_ended", 0), summary["questions"]
    if not n or ended * 2 <= n:
        return None
    window = f" of {n_ctx} tokens" if n_ctx else ""
    return (
        f"{ended} of {n} questions ended because the prompt outgrew the context window{window}, so their scores "
        "say nothing about the model; raise --n-ctx (or the server's context size), lower --max-tokens or "
        "--max-steps, or use fewer exemplars (-k)"
    )


def score(value: float | None, form: str) -> str:
    """A question's EM or F1 as text: "-" when it has no gold answer, so no score."""
    return "-" if value is None else form.format(value)


def game_score(success: float | bool | None, reward: float | None) -> str:
    """A game's scores as text, as every report says them: "won, reward 1.00" or "not won, reward 0.00"."""
    return f"{'won' if success else 'not won'}, reward {score(reward, '{:.2f}')}"


# Column header -> (summary key or manifest field, format).
COLUMNS = {
    "n": ("questions", "{:d}"),
    "scored": ("scored", "{:d}"),
    "EM": ("em", "{:.3f}"),
    "F1": ("f1", "{:.3f}"),
    "score": ("score", "{:.1f}"),
    "success": ("success", "{:.3f}"),
    "reward": ("reward", "{:.3f}"),
    "invalid/step": ("invalid_per_step", "{:.2f}"),
    "finished": ("finished", "{:.0%}"),
    "invalid/q": ("invalid_per_question", "{:.2f}"),
    "fallback/q": ("fallback_per_question", "{:.2f}"),
    "repeats/q": ("repeats_per_question", "{:.2f}"),
    "supported": ("supported", "{:.0%}"),
    "EM supp": ("em_supported", "{:.3f}"),
    "EM unsupp": ("em_unsupported", "{:.3f}"),
    "search hits": ("search_hit_rate", "{:.0%}"),
    "steps/q": ("steps", "{:.1f}"),
    "calls/q": ("calls", "{:.1f}"),
    "gen tok/q": ("completion_tokens", "{:.0f}"),
    "eval tok/q": ("evaluated_tokens", "{:.0f}"),
    "s/q": ("seconds", "{:.1f}"),
    "q/min": ("per_minute", "{:.1f}"),
    "vote share": ("vote_share", "{:.0%}"),
}


# What a table of program runs shows beside pass@1: what the implementations cost.
PROGRAM_KEYS = ("steps", "calls", "completion_tokens", "evaluated_tokens", "seconds", "per_minute")


def columns_of(task: TaskType) -> dict[str, tuple[str, str]]:
    """The COLUMNS a table of `task`'s runs shows: every one; a run of programs, its count, its pass@1 (by the
    task's label) and what its implementations cost (PROGRAM_KEYS), for it has no actions, answers or searches."""
    if not task.writes_programs:
        return COLUMNS
    shown = {}
    for header, (key, form) in COLUMNS.items():
        if key in ("questions", "scored", *PROGRAM_KEYS):
            shown[header] = (key, form)
        elif key == task.headline.key:
            shown[task.headline.label] = (key, form)  # pass@1
    return shown


# Columns shown only when some run has them, and the values that do not count as having them:
# CoT-SC's, the back-offs', and the loop once a run used the reference loop. ("scored" is shown
# only when some run has questions without a gold answer.)
OPTIONAL = {"vote share": ("-",), "answered by": ("-",), "loop": ("-", "tolerant")}
OPTIONAL |= {"score": ("-",), "success": ("-",), "reward": ("-",), "invalid/step": ("-",)}  # a game run's
# The columns of questions, left out of a table of games only (where they are all empty, or zero by construction).
QUESTIONS_ONLY = ("EM", "F1", "finished", "fallback/q", "supported", "EM supp", "EM unsupp", "search hits")


def drop_unused(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows without the optional columns that no row fills (see OPTIONAL), each with every column some row
    has ("-" where it has none: a run of programs beside a run of questions)."""
    headers = list(dict.fromkeys(h for row in rows for h in row))
    rows = [{h: row.get(h, "-") for h in headers} for row in rows]
    unused = [h for h, empty in OPTIONAL.items() if all(row.get(h, "-") in empty for row in rows)]
    if rows and all(row.get("success", "-") != "-" for row in rows):  # games only: the questions' columns say nothing
        unused += [h for h in QUESTIONS_ONLY if all(row.get(h, "-") in ("-", "0%", "0.00") for row in rows)]
    unused += ["scored"] * all(row.get("scored", row.get("n")) == row.get("n") for row in rows)  # every one scored
    return [{k: v for k, v in row.items() if k not in unused} for row in rows]


def row_of(name: str, manifest: dict | None, records: list[dict]) -> dict[str, str]:
    """One table row for a run read by `read_run` (its manifest and records): its name, model, grammar and
    summary, formatted (the task's columns: `columns_of`)."""
    config = manifest.get("config", {}) if manifest else {}
    summary = summarize(records)
    grammar = (config.get("grammar") or "off") if manifest else "?"  # "?": the manifest is missing
    method = str(config.get("method", "react")) if manifest else summary.get("method", "?")
    row = {"run": name, "method": method, "loop": summary.get("loop", "-")}
    row |= {"model": str(config.get("model", "?")), "grammar": grammar}
    for header, (key, form) in columns_of(of_records(records)).items():
        row[header] = _cell(summary, key, form)
    row["answered by"] = _branch_cell(summary)
    row["ended"] = _endings_cell(summary)
    return row


def _cell(summary: dict, key: str, form: str) -> str:
    """One formatted number of a summary; "-" when there are none, "unknown" when a backend did not say."""
    if key not in summary:
        return "-"
    return "unknown" if summary[key] is None else form.format(summary[key])


def table(rows: list[dict[str, str]], style: str = "text") -> str:
    """Rows as an aligned text table, a Markdown table or CSV."""
    headers = list(rows[0]) if rows else ["run"]
    if style == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=headers, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()
    if style == "markdown":
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
        lines += ["| " + " | ".join(row[h] for h in headers) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    widths = {h: max(len(h), *(len(row[h]) for row in rows)) for h in headers}
    lines = ["  ".join(h.ljust(widths[h]) for h in headers)]
    lines += ["  ".join(row[h].ljust(widths[h]) for h in headers) for row in rows]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def times_note(unit: str = "question") -> str:
    """What the two times of a summary mean, said under every table that shows them (`unit`: a question, a
    game's episode, a problem)."""
    return (
        f"s/q is each {unit}'s own wall time, which overlaps under --workers; q/min is {unit}s per minute of "
        f"the run's wall time (the time its {unit}s covered, resumes' gaps left out)"
    )


ESSENTIAL = (
    "n",
    "scored",
    "EM",
    "ΔEM",
    "F1",
    "ΔF1",
    "score",
    "Δscore",
    "success",
    "Δsuccess",
    "reward",
    "Δreward",
    "finished",
)


def fitted(rows: list[dict[str, str]], width: int | None, columns: str | None = None) -> str:
    """A text table that fits `width` columns: as many tables as it takes, each starting with the name
    column, the essential columns first (ESSENTIAL), then the others in order. `columns` is "all" (one table,
    every column, however wide) or a comma-separated list of the columns to show after the name."""
    if not rows:
        return table(rows)
    name, *rest = list(rows[0])
    if columns and columns != "all":
        wanted = [c.strip() for c in columns.split(",") if c.strip()]
        unknown = [c for c in wanted if c not in rest]
        if unknown:
            raise DataError(f"--columns: no column {unknown[0]!r}; the columns are {', '.join(rest)} (or all)")
        rest = wanted
    if columns == "all" or width is None:
        return table([{h: row[h] for h in (name, *rest)} for row in rows])
    if not columns:  # the essential columns first: the scores with their intervals and differences, and finished
        rest = [c for c in ESSENTIAL if c in rest] + [c for c in rest if c not in ESSENTIAL]
    size = {h: max(len(h), *(len(row[h]) for row in rows)) for h in (name, *rest)}
    parts, part, used = [], [], size[name]
    for header in rest:
        if part and used + 2 + size[header] > width:
            parts.append(part)
            part, used = [], size[name]
        part.append(header)
        used += 2 + size[header]
    parts.append(part)
    return "\n".join(table([{h: row[h] for h in (name, *part)} for row in rows]) for part in parts)
