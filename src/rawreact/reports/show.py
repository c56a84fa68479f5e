"""`rawreact show`: a run's questions as a list, and one question's transcript as the model saw it."""

from rawreact.agents.reasoning import Reasoning
from rawreact.agents.record import Trajectory, history_text
from rawreact.config.choices import BACKOFFS
from rawreact.core.tasks import of_records, task_type
from rawreact.core.text import one_line, plural
from rawreact.reports.summary import game_score, score, table
from rawreact.runs.records import read_trial


def listing(records: list[dict], width: int | None = None) -> str:
    """The questions of a run, one row each: id, EM, F1, how it ended, steps, then the question, the
    prediction and the gold answer (one line each), cut with "…" to fit `width` columns if given."""
    if records and of_records(records).writes_programs:  # judged by hidden tests: passed, and why not
        return _programs_listing(records)
    if records and of_records(records).scoring == "outcome":  # judged by the environment: won, and reward
        return _games_listing(records)
    rows = [
        {"id": r["id"], "EM": score(r["em"], "{:.0f}"), "F1": score(r["f1"], "{:.2f}"), "ended": r["ended"]}
        | {"steps": str(r["steps"])}
        | {"question": one_line(r["question"]), "prediction": one_line(r["prediction"]), "gold": one_line(r["answer"])}
        for r in records
    ]
    if not rows:
        return "no questions yet\n"
    if width is not None:  # the answers take up to a quarter each, the question the rest
        longest = {h: max(len(h), *(len(row[h]) for row in rows)) for h in rows[0]}
        texts = ("question", "prediction", "gold")
        room = width - sum(longest[h] + 2 for h in rows[0] if h not in texts) - 4
        limits = {h: min(longest[h], max(8, room // 4)) for h in texts[1:]}
        limits["question"] = max(8, room - sum(limits.values()))
        for row in rows:
            row |= {h: _cut(row[h], limits[h]) for h in texts}
    return table(rows)


def _games_listing(records: list[dict]) -> str:
    """The games of a run, one row each: id, recipe, won, reward, how it ended, steps, invalid commands, task."""
    rows = [
        {"id": r["id"], "recipe": r.get("game") or "-", "won": "yes" if r.get("success") else "no"}
        | ({"score": score(r.get("score"), "{:g}")} if "score" in r else {})  # an environment's own (ScienceWorld's)
        | {"reward": score(r.get("reward"), "{:.2f}"), "ended": r["ended"], "steps": str(r["steps"])}
        | {"invalid": str(r["invalid_actions"]), "task": one_line(r["question"])}
        for r in records
    ]
    return table(rows)


def _programs_listing(records: list[dict]) -> str:
    """The problems of a run of programs, one row each: id, function, passed, implementations, calls, and why the
    hidden tests failed."""
    rows = [
        {"id": r["id"], "function": (r.get("program") or {}).get("entry_point", "-")}
        | {"passed": "yes" if r.get("success") else "no", "implementations": str(r["steps"])}
        | {
            "calls": str(r["model_calls"]),
            "hidden tests": one_line(((r.get("program") or {}).get("hidden") or {}).get("reason", "-")),
        }
        for r in records
    ]
    return table(rows)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _count(n: int | None, word: str) -> str:
    """`plural`, or "? repeats" for a count that records written before it was counted lack."""
    return f"? {word}s" if n is None else plural(n, word)


def show(record: dict, with_prompt: bool = False) -> str:
    """One question of a run: its scores, then what the model saw and wrote (the prompt on request).

    A ReAct or Act question shows its transcript; a Standard or CoT question its completion; a
    CoT-SC question the vote and every sample; a back-off both parts, in the order they ran.
    """
    method, branch = record.get("method", "react"), record.get("branch", "react")
    answered = f"; answered by {branch}" if method in BACKOFFS else ""
    loop = f", {record['loop']} loop" if record.get("loop") else ""
    if task_type(record.get("task")).writes_programs:
        program = record.get("program") or {}
        verdict, hidden = task_type(record.get("task")).outcome(record), program.get("hidden") or {}
        head = (
            f"id {record['id']}: {verdict} (hidden tests: {hidden.get('reason', '?')}; "
            f"programs ran with {program.get('isolation', '?')}); "
            f"{plural(record['steps'], 'implementation')}, {plural(record['model_calls'], 'call')}, "
            f"{record['seconds']:.1f} s; method {method}\n"
        )
    elif task_type(record.get("task")).scoring == "outcome":
        head = (
            f"id {record['id']}: {game_score(record.get('success'), record.get('reward'))}; ended by {record['ended']} "
            f"after {plural(record['steps'], 'step')}, {plural(record['model_calls'], 'call')}, "
            f"{plural(record['invalid_actions'], 'invalid command')}, {_count(record.get('repeats'), 'repeat')}, "
            f"{record['seconds']:.1f} s; method {method}{loop}\n"
        )
    else:
        head = (
            f"id {record['id']}: EM {score(record['em'], '{:.0f}')}, F1 {score(record['f1'], '{:.2f}')}; "
            f"prediction {record['prediction']!r}, "
            f"gold {record['answer']!r}; ended by {record['ended']} after {plural(record['steps'], 'step')}, "
            f"{plural(record['model_calls'], 'call')} ({record.get('fallback_calls', '?')} fallback), "
            f"{plural(record['invalid_actions'], 'invalid action')}, {_count(record.get('repeats'), 'repeat')}, "
            f"{record['seconds']:.1f} s; method "
            f"{method}{answered}{loop}{_seen(record.get('supported'))}\n"
        )
    if record.get("trials"):
        return head + trials_text(record, with_prompt)
    parts = []
    if record.get("trajectory") is not None:
        traj = Trajectory.from_dict(record["trajectory"])
        if traj.messages is not None:  # a tools episode: its message history (the system message on request)
            parts.append(history_text(traj.messages if with_prompt else traj.messages[1:]))
        else:
            transcript = traj.transcript()
            parts.append(transcript if with_prompt else transcript[len(traj.prompt) :])
    if record.get("reasoning") is not None:
        parts.append(reasoning_text(Reasoning.from_dict(record["reasoning"]), with_prompt))
    if method == "cot-sc-react":
        parts.reverse()
    if len(parts) == 1:
        return head + "\n" + parts[0]
    return head + "".join(f"\n--- {name}\n{part}" for name, part in zip(BACKOFFS[method], parts, strict=True))


def trials_text(record: dict, with_prompt: bool) -> str:
    """A Reflexion question's trials in order: each as the model saw and wrote it (its memory of the failed
    trials, then its steps or CoT answer), the evaluator's verdict, and the reflection written after it."""
    part = record.get("trajectory") or record.get("reasoning")
    settings = record.get("reflexion") or {}
    out = [
        f"Reflexion: strategy {settings.get('strategy', '?')}, evaluator {settings.get('evaluator', '?')}, "
        f"{plural(len(record['trials']), 'trial')} of at most {settings.get('trials', '?')}\n"
    ]
    for data in record["trials"]:
        trial = read_trial(data, part["prompt"])
        verdict = "passed" if trial.passed else "failed"
        scored = f"answer {trial.answer!r}, EM {score(data.get('em'), '{:.0f}')}"
        if "success" in data:  # a game's trial
            scored = game_score(data["success"], data.get("reward"))
        out.append(
            f"\n--- trial {trial.n}: {verdict} ({settings.get('evaluator', '?')}); {scored}, "
            f"ended by {trial.ended}, {plural(data['model_calls'], 'call')}\n"
        )
        if isinstance(trial.part, Trajectory):
            text = trial.part.transcript()
            text = text if with_prompt else text[len(trial.part.prompt) :]
            out.append(text if text.endswith("\n") else text + "\n")
        else:
            out.append(reasoning_text(trial.part, with_prompt))
        reflection = trial.reflection
        if reflection is not None:
            cut = f" (observations of steps {', '.join(map(str, reflection.cut))} cut to fit)" if reflection.cut else ""
            out.append(f"[reflection{cut}] {reflection.text or '(none: ' + reflection.ended + ')'}\n")
    return "".join(out)


def _seen(supported: bool | None) -> str:
    """What `show` says of the support check."""
    if supported is None:
        return ""
    return "; the answer occurs in an observation" if supported else "; the answer occurs in no observation"


def reasoning_text(reasoning: Reasoning, with_prompt: bool) -> str:
    """A Standard or CoT completion; for CoT-SC, the vote, then each sample and its answer."""
    if reasoning.method != "cot-sc":
        text = reasoning.transcript()
        return (text if with_prompt else text[len(reasoning.prompt) :]) + "\n"
    tally = reasoning.vote
    lines = [
        f"CoT-SC: {len(reasoning.samples)} samples at temperature {reasoning.temperature:g}, seed {reasoning.seed}; "
        f"the answer {tally.answer!r} has {tally.votes} votes ({tally.share:.0%})",
        "votes: " + (", ".join(f"{answer!r} {count}" for answer, count in tally.counts.items()) or "no answers"),
    ]
    if with_prompt:
        lines.append(reasoning.prompt + f"{reasoning.header}: {reasoning.question}\n{reasoning.cue}")
    for k, sample in enumerate(reasoning.samples, 1):
        lines.append(f"\n[sample {k}] answer {sample.answer!r}\n{reasoning.cue}{sample.call.text}")
    return "\n".join(lines) + "\n"
