"""The report page's questions: the table to sort and filter, and each question's transcript, escaped.

A transcript shows every step as the model wrote it (raw completions on request), its observations,
and the few-shot prompts once each; everything from data or a model is escaped where it is written.
"""

import hashlib
from html import escape

from rawreact.agents.reasoning import Reasoning
from rawreact.agents.record import COMMAND_LOOPS, Step, Trajectory
from rawreact.config.choices import BACKOFFS
from rawreact.core.tasks import of_records, task_type
from rawreact.reports.show import reasoning_text
from rawreact.reports.summary import game_score, score
from rawreact.runs.records import read_trial

_ERRORS = {"no action": "no action", "truncated": "truncated", "invalid": "invalid action"}
_ERRORS["inadmissible"] = "not a command the game admits"


_COLUMNS = (  # header, type (for sorting)
    ("run", "text"),
    ("id", "text"),
    ("question", "text"),
    ("gold", "text"),
    ("prediction", "text"),
    ("EM", "number"),
    ("F1", "number"),
    ("ended", "text"),
    ("steps", "number"),
    ("invalid", "number"),
    ("repeats", "number"),
    ("s", "number"),
)


# A game has no gold answer nor prediction: its row shows its recipe, whether it was won, and its reward.
_GAME_COLUMNS = {"question": ("task", "text"), "gold": ("recipe", "text"), "prediction": ("answer", "text")}
_GAME_COLUMNS |= {"EM": ("won", "number"), "F1": ("reward", "number")}
# A program's row shows its function, how its own tests went, the hidden tests' verdict, and whether it passed.
_PROGRAM_COLUMNS = {"question": ("function", "text"), "gold": ("own tests", "text")}
_PROGRAM_COLUMNS |= {"prediction": ("hidden tests", "text"), "EM": ("passed", "number")}
# ... and has no second score, no actions to be invalid and no steps to repeat (its steps are implementations).
_NOT_PROGRAMS = ("F1", "invalid", "repeats")
_NOT_PROGRAMS_CELLS = tuple(name.lower() for name in _NOT_PROGRAMS)  # each cell's class


def questions_table(records: dict[str, list[dict]]) -> str:
    """The filter controls and the table of questions, each row followed by its hidden transcript."""
    several = len(records) > 1
    columns = [c for c in _COLUMNS if several or c[0] != "run"]
    task = of_records([r for found in records.values() for r in found])
    programs = task.writes_programs
    if programs:
        columns = [c for c in columns if c[0] not in _NOT_PROGRAMS]
    if task.scoring == "outcome":  # won, and reward (a program: passed, and its tests)
        renamed = _PROGRAM_COLUMNS if programs else _GAME_COLUMNS
        columns = [renamed.get(name, (name, kind)) for name, kind in columns]
    runs = "".join(f'<option value="{escape(name)}">{escape(name)}</option>' for name in records)
    controls = [
        f'<label><input type="checkbox" id="f-wrong"> {"failed" if programs else "wrong"} only</label>',
        "" if programs else '<label><input type="checkbox" id="f-invalid"> with invalid actions</label>',
        "" if programs else '<label><input type="checkbox" id="f-steps"> ended by the step limit</label>',
        f'<select id="f-run" aria-label="run"><option value="">all runs</option>{runs}</select>' if several else "",
        '<input type="search" id="f-text" placeholder="text in the row" aria-label="text in the row">',
        '<label><input type="checkbox" id="f-raw"> raw completions</label>',
        '<span id="shown"></span>',
    ]
    head = "".join(f'<th data-type="{kind}">{escape(name)}</th>' for name, kind in columns)
    rows = []
    for name, found in records.items():
        for record in found:
            rows.append(_question_row(name, record, several, len(columns), programs))
    return (
        f'<div id="filters">{"".join(controls)}</div>'
        f'<div class="scroll"><table id="questions" data-unit="{escape(task.unit)}">'
        f"<thead><tr>{head}</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
    )


def _question_row(run: str, record: dict, several: bool, width: int, programs: bool = False) -> str:
    game = task_type(record.get("task")).scoring == "outcome"
    em = record.get("success") if game else record["em"]  # a game is right when won
    right = em == 1
    cells = [("run", run, None)] if several else []
    question, gold, prediction = (
        record["question"],
        record.get("game", "") if game else record["answer"],
        record["prediction"],
    )
    program = record.get("program")
    if isinstance(program, dict):  # its function, its own tests' outcome and the hidden tests' verdict, not its code
        tried = program.get("tried") or []
        question = program.get("entry_point", "")
        gold = f"{sum(bool(t.get('passed')) for t in tried)} of {len(tried)} held" if "tests" in program else "-"
        prediction = (program.get("hidden") or {}).get("reason", "")
    cells += [
        ("id", record["id"], None),  # a link to the row itself: `#RUN/ID` opens it
        ("q", question, None),
        ("gold", gold, None),
        ("prediction", prediction, None),
        ("em", score(em, "{:.0f}"), em),
        ("f1", score(record.get("reward") if game else record["f1"], "{:.2f}"), record.get("reward" if game else "f1")),
        ("ended", record["ended"], None),
        ("steps", str(record["steps"]), record["steps"]),
        ("invalid", str(record["invalid_actions"]), record["invalid_actions"]),
        ("repeats", str(record.get("repeats", "?")), record.get("repeats", -1)),
        ("s", f"{record['seconds']:.1f}", record["seconds"]),
    ]
    if programs:
        cells = [cell for cell in cells if cell[0] not in _NOT_PROGRAMS_CELLS]
    anchor = question_anchor(run, record["id"])
    tds = "".join(
        f'<td class="{cls}"'
        + ("" if v is None else f' data-v="{escape(str(v))}"')
        + ">"
        + (f'<a href="#{escape(anchor)}">{escape(text)}</a>' if cls == "id" else escape(text))
        + "</td>"
        for cls, text, v in cells
    )
    data = (
        f'data-run="{escape(run)}" data-em="{escape(score(em, "{:.0f}"))}" '
        f'data-invalid="{escape(str(record["invalid_actions"]))}" data-ended="{escape(record["ended"])}"'
    )
    return (
        f'<tr class="question {"right" if right else "wrong" if em is not None else "unscored"}" '
        f'id="{escape(anchor)}" {data}>{tds}</tr>'
        f'<tr class="detail" hidden><td colspan="{width}">{transcript(record)}</td></tr>'
    )


def question_anchor(run: str, question_id: str) -> str:
    """The address of a question's row on the page, `RUN/ID` (white space, which no id may hold, as `_`)."""
    return "_".join(f"{run}/{question_id}".split())


def transcript(record: dict) -> str:
    """One question as HTML: each part's steps (thought, action, observation) or completions, marked."""
    method = record.get("method", "react")
    parts = []
    if record.get("trials"):
        parts.append(_trials(record))
    elif record.get("trajectory") is not None:
        parts.append(_trajectory(Trajectory.from_dict(record["trajectory"])))
    if record.get("reasoning") is not None and not record.get("trials"):
        reasoning = Reasoning.from_dict(record["reasoning"])
        parts.append(_prompt(reasoning.prompt) + f"<pre>{escape(reasoning_text(reasoning, False))}</pre>")
    if method == "cot-sc-react":
        parts.reverse()
    if method in BACKOFFS and len(parts) == 2:
        parts = [f"<h4>{escape(name)}</h4>{part}" for name, part in zip(BACKOFFS[method], parts, strict=True)]
    ending = (
        f'<p class="ending">Ended by {escape(record["ended"])}: answer {escape(repr(record["prediction"]))}, '
        f"gold {escape(repr(record['answer']))} (EM {score(record['em'], '{:.0f}')}, "
        f"F1 {score(record['f1'], '{:.2f}')}).</p>"
    )
    if task_type(record.get("task")).scoring == "outcome":
        scores = game_score(record.get("success"), record.get("reward"))
        ending = f'<p class="ending">Ended by {escape(record["ended"])}: {scores}.</p>'
    return f'<div class="transcript">{"".join(parts)}{ending}</div>'


def _trials(record: dict) -> str:
    """A Reflexion question's trials in order, each with its memory, its steps, its verdict and its reflection."""
    prompt = (record.get("trajectory") or record.get("reasoning"))["prompt"]
    evaluator = (record.get("reflexion") or {}).get("evaluator", "?")
    out = []
    for data in record["trials"]:
        trial = read_trial(data, prompt)
        verdict = "passed" if trial.passed else "failed"
        out.append(
            f'<h4 class="trial">Trial {trial.n}: {verdict} ({escape(evaluator)}); answer {escape(repr(trial.answer))}, '
            f"EM {score(data.get('em'), '{:.0f}')}</h4>"
        )
        if isinstance(trial.part, Trajectory):
            out.append(_trajectory(trial.part))
        else:
            preamble = f'<pre class="memory">{escape(trial.part.preamble)}</pre>' if trial.part.preamble else ""
            out.append(
                _prompt(trial.part.prompt) + preamble + f"<pre>{escape(reasoning_text(trial.part, False))}</pre>"
            )
        if trial.reflection is not None:
            cut = (
                f" (observations of steps {', '.join(map(str, trial.reflection.cut))} cut to fit)"
                if trial.reflection.cut
                else ""
            )
            text = trial.reflection.text or f"(none: {trial.reflection.ended})"
            out.append(f'<p class="reflection"><span class="tag">Reflection{escape(cut)}</span> {escape(text)}</p>')
    return "".join(out)


def _prompt_id(prompt: str) -> str:
    return "prompt-" + hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _prompt(prompt: str, label: str = "Few-shot prompt") -> str:
    """A link to the prompt, which the page holds once however many questions used it."""
    return f'<p class="note">{label}: <a href="#{_prompt_id(prompt)}">{_prompt_id(prompt)}</a></p>'


def prompts_html(records: dict[str, list[dict]]) -> str:
    """Each few-shot prompt the runs used, once, folded, under the id the transcripts link to."""
    found: dict[str, int] = {}
    for record in (r for rs in records.values() for r in rs):
        for part in ("trajectory", "reasoning"):
            if record.get(part) is not None:
                prompt = record[part]["prompt"]
                found[prompt] = found.get(prompt, 0) + 1
    if not found:
        return ""
    items = "".join(
        f'<details id="{_prompt_id(p)}"><summary>{_prompt_id(p)}: {len(p)} characters, used {n} '
        f"time{'s' if n != 1 else ''}</summary><pre>{escape(p)}</pre></details>"
        for p, n in found.items()
    )
    return f"<h2>Prompts</h2>{items}"


def _trajectory(traj: Trajectory) -> str:
    label = "System message" if traj.loop == "tools" else "Few-shot prompt"
    out = [
        _prompt(traj.prompt, label),
        f'<pre class="memory">{escape(traj.preamble)}</pre>' if traj.preamble else "",
        f'<p><span class="tag">{escape(traj.header)}</span> {escape(traj.question)}</p>'
        if traj.loop != "program"
        else f'<p><span class="tag">{escape(traj.header)}</span></p><pre>{escape(traj.question)}</pre>',
    ]
    out += [_step(step, traj.loop) for step in traj.steps]
    return "".join(out)


def _step(step: Step, loop: str) -> str:
    badges = []
    if step.error is not None:
        badges.append(f'<span class="badge bad">{escape(_ERRORS.get(step.error, step.error))}</span>')
    elif step.finish_reason == "length":
        badges.append('<span class="badge warn">ran to the token limit</span>')
    if step.fallback:
        badges.append('<span class="badge warn">fallback call</span>')
    if step.repeat_of is not None:
        badges.append(f'<span class="badge warn">repeats step {escape(str(step.repeat_of))}</span>')
    if not step.calls:
        closing = "another call of the same reply" if loop == "tools" else "closing step, not shown to the model"
        badges.append(f'<span class="badge">{closing}</span>')
    classes = "step" + (" invalid" if step.error is not None else "") + (" repeat" if step.repeat_of else "")
    lines = []
    if loop == "tools" and not step.action_text and not step.observation:  # a plain-text answer
        message = _line("thought", f"Message {step.i}", escape(step.thought or ""))
        return f'<div class="{classes}" data-key="{step_key(step)}">{message}</div>'

    if loop == "program":  # an implementation: the reflection before it, its code, what its tests said
        if step.thought:
            reflected = f'<span class="text">{escape(step.thought)}</span>'
            lines.append(_line("thought", f"Reflection {step.i - 1}", reflected))
        lines.append(_line("action", f"Program {step.i}", f"<pre>{escape(step.action_text)}</pre>"))
        lines.append(_line("observation", f"Tests {step.i}", f"<pre>{escape(step.observation)}</pre>"))
    else:
        if step.thought is not None:
            lines.append(_line("thought", f"Thought {step.i}", f'<span class="text">{escape(step.thought)}</span>'))
        said, seen_as = (
            (f"> {step.i}", f"Game {step.i}")
            if loop in COMMAND_LOOPS
            else (f"Action {step.i}", f"Observation {step.i}")
        )
        lines.append(_line("action", said, f"<code>{escape(step.action_text)}</code>{''.join(badges)}"))
        note = f'<span class="guard-note">{escape(step.note)}</span>' if step.note else ""
        seen = f'<span class="text">{escape(step.observation)}</span>{note}'
        lines.append(_line("observation", seen_as, seen))
    for k, call in enumerate(step.calls, 1):
        evaluated = "?" if call.evaluated_tokens is None else call.evaluated_tokens
        meta = (
            f"call {k} of {len(step.calls)}: finish reason {call.finish_reason}, {call.prompt_tokens} prompt tokens "
            f"({evaluated} evaluated), {call.completion_tokens} generated, {call.seconds:.2f} s"
        )
        lines.append(f'<div class="raw"><span class="meta">{escape(meta)}</span><pre>{escape(call.text)}</pre></div>')
    return f'<div class="{classes}" data-key="{step_key(step)}">{"".join(lines)}</div>'


def step_key(step: Step) -> str:
    """What makes two steps the same: the thought, the action and the observation, as a short hash."""
    text = "\0".join((step.thought or "", step.action_text, step.observation))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _line(cls: str, tag: str, html: str) -> str:
    return f'<div class="{cls}"><span class="tag">{escape(tag)}</span> {html}</div>'
