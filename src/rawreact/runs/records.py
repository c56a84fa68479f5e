"""Reading run files back: `read_run` and `read_manifest`, with every record checked field by field.

A damaged or hand-edited line is one clear error naming the file, the line and the field; a
half-written last line (a run killed mid-write) is dropped, so resuming asks that question again.
"""

import hashlib
import json
from pathlib import Path

from rawreact.agents.reasoning import Reasoning
from rawreact.agents.record import Trajectory
from rawreact.agents.reflexion import Trial
from rawreact.core.errors import DataError
from rawreact.core.tasks import TASK_TYPES, TaskType, task_type


def trials_path(out: str | Path) -> Path:
    """Where the Reflexion trials under way of the run file `out` are kept: RUN.jsonl -> RUN.jsonl.trials."""
    out = Path(out)
    return out.with_name(out.name + ".trials")


def manifest_path(out: str | Path) -> Path:
    """Where the manifest of the run file `out` lives: RUN.jsonl -> RUN.jsonl.manifest.json.

    The whole file name is kept, so `res.jsonl` and `res.json` never share a manifest.
    """
    out = Path(out)
    return out.with_name(out.name + ".manifest.json")


def legacy_manifest_path(out: str | Path) -> Path:
    """The name rawreact 0.1 gave the manifest of a run file: RUN.jsonl -> RUN.manifest.json."""
    out = Path(out)
    return out.with_name(out.stem + ".manifest.json")


def _legacy_manifest(out: Path) -> Path | None:
    """Where rawreact 0.1 put the manifest of a `.jsonl` run file (RUN.manifest.json), if it is there."""
    legacy = legacy_manifest_path(out)
    return legacy if out.suffix == ".jsonl" and legacy.is_file() else None


def existing_manifest(out: Path) -> Path | None:
    """The manifest a run file has, under its name or the legacy one, or None."""
    path = manifest_path(out)
    return path if path.exists() else _legacy_manifest(out)


def read_run(path: str | Path) -> tuple[dict | None, list[dict]]:
    """The manifest (None if there is none) and the complete records of a run file.

    A last line without its line break was cut by a crash; it is left out. Each record's
    trajectory gets back the few-shot prompt that the manifest stores once for the whole run.
    """
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path} is a folder; give a run file (RUN.jsonl)")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot read the run file: {error.strerror}") from None
    manifest = read_manifest(path)
    if manifest is None and data.strip() and not _starts_like_a_run(data):
        # No manifest, and no result line first: a question file given where a run file goes (HotpotQA's dev set
        # is one line of JSON; a collection is an object over many lines).
        raise DataError(
            f"{path} is not a run file: it has no manifest beside it, and its first line is no result line; give a "
            "RUN.jsonl that `rawreact run --out` wrote (a question file goes to `rawreact run`)"
        )
    prompts = (manifest or {}).get("prompts", {})
    return manifest, parse_records(path, data[: data.rfind(b"\n") + 1], prompts)


def _starts_like_a_run(data: bytes) -> bool:
    """Whether the first line with text is a whole JSON object with an id, as every result line is."""
    first = next((line for line in data.split(b"\n") if line.strip()), b"")
    if b"\n" not in data:  # one line without its line break: nothing complete to read
        return False
    try:
        record = json.loads(first.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(record, dict) and "id" in record


def read_manifest(out: str | Path) -> dict | None:
    """The manifest of the run file `out`, or None when it has none."""
    path = existing_manifest(Path(out))
    if path is None:
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"{path}: cannot read the manifest: {error}") from None
    if not isinstance(manifest, dict):
        raise DataError(f"{path}: a manifest is a JSON object; was it edited?")
    for key, kind, what in _MANIFEST:
        if key in manifest and not isinstance(manifest[key], kind):
            raise DataError(f"{path}: its {key!r} must be {what}; was it edited? restore it from a backup")
    if not all(isinstance(text, str) for text in manifest.get("prompts", {}).values()):
        raise DataError(f"{path}: its 'prompts' must map hashes to prompt texts; was it edited?")
    if not all(isinstance(resumed, dict) for resumed in manifest.get("resumes", [])):
        raise DataError(f"{path}: its 'resumes' must be a list of objects; was it edited? restore it from a backup")
    return manifest


# The parts of a manifest that readers rely on, with the type rawreact writes (a part may be missing:
# manifests made before it was recorded).
_MANIFEST = (
    ("config", dict, "a JSON object"),
    ("prompts", dict, "a JSON object"),
    ("settings", dict, "a JSON object"),
    ("resumes", list, "a list"),
    ("questions", (int, type(None)), "a whole number"),
)


# What every reader of run files (report, the page, show, compare, export, resume) relies on: each
# field with the types it may have, checked once, where lines are read. `None` in a tuple allows
# null; a key in _OPTIONAL may be missing (lines written before it was recorded), not mistyped.
_NUMBER = (int, float)


_FIELDS: dict[str, tuple] = {
    "id": (str,),
    "question": (str,),
    "answer": (str,),
    "prediction": (str,),
    "em": (*_NUMBER, None),  # null: the question has no gold answer, so no score
    "f1": (*_NUMBER, None),
    "ended": (str,),
    "steps": (int,),
    "model_calls": (int,),
    "invalid_actions": (int,),
    "seconds": _NUMBER,
    "tokens": (dict,),
}


_OPTIONAL: dict[str, tuple] = {
    "endpoint": (str,),
    "restarts": (int,),
    "lost_on": (list,),
    "method": (str,),
    "branch": (str,),
    "loop": (str, None),
    "fallback_calls": (int,),
    "repeats": (int,),
    "searches": (int,),
    "search_hits": (int,),
    "supported": (bool, None),
    "vote_share": (*_NUMBER, None),
    "task": (str,),
    "label": (str, None),
    "lenient_em": _NUMBER,
    "kind": (str,),
    "started": _NUMBER,
    "finished": _NUMBER,
    "reflexion": (dict, None),
    "trials": (list,),
}


_CALL = {"text": (str,), "finish_reason": (str,)}


_CALL_OPTIONAL = {
    "prompt_tokens": (int,),
    "completion_tokens": (int,),
    "evaluated_tokens": (int, None),
    "seconds": _NUMBER,
    "cached": (bool,),  # a call cache's reply (models.cache); computed calls leave it out
}


_STEP = {
    "i": (int,),
    "thought": (str, None),
    "action": (list, None),
    "action_text": (str,),
    "observation": (str,),
    "error": (str, None),
    "seconds": _NUMBER,
    "calls": (list,),
}


_STEP_OPTIONAL = {"fallback": (bool,), "repeat_of": (int, None), "note": (str,)}


_TRAJECTORY = {"question": (str,), "prompt": (str,), "answer": (str,), "ended": (str,), "steps": (list,)}


_TRAJECTORY_OPTIONAL = {"loop": (str,), "messages": (list, None), "header": (str,), "preamble": (str,)}


_REASONING = {
    "method": (str,),
    "question": (str,),
    "prompt": (str,),
    "temperature": (*_NUMBER, None),
    "seed": (int, None),
    "ended": (str,),
    "samples": (list,),
}


_REASONING_OPTIONAL = {"seconds": _NUMBER, "header": (str,), "preamble": (str,)}


_KIND_NAMES = {str: "a string", int: "a whole number", float: "a number", dict: "an object", list: "a list"}
_KIND_NAMES |= {bool: "true or false", None: "null"}


def _wrong(data: dict, required: dict, optional: dict, where: str = "") -> str | None:
    """What is wrong with the fields of `data` (missing, or of a type not allowed), or None."""
    for key in required:
        if key not in data:
            return f"has no {where}{key!r}"
    for key, kinds in (required | optional).items():
        if key in data and not _is(data[key], kinds):
            number = int in kinds and float in kinds  # a whole number or not: "a number"
            names = " or ".join(
                "a number" if number and k in _NUMBER else _KIND_NAMES[k] for k in kinds if not (number and k is float)
            )
            return f"has {where}{key!r} = {json.dumps(data[key])[:40]}, which is not {names}"
    return None


def _is(value: object, kinds: tuple) -> bool:
    if value is None:
        return None in kinds
    if isinstance(value, bool):  # JSON's true is no count
        return bool in kinds
    return any(kind is not None and isinstance(value, kind) for kind in kinds)


def _calls_problem(calls: list, where: str) -> str | None:
    for k, call in enumerate(calls, 1):
        if not isinstance(call, dict):
            return f"has {where}call {k} that is not an object"
        problem = _wrong(call, _CALL, _CALL_OPTIONAL, f"{where}call {k} ")
        if problem:
            return problem
        if any((call.get(key) or 0) < 0 for key in ("prompt_tokens", "completion_tokens", "evaluated_tokens")):
            return f"has {where}call {k} with a negative token count"
    return None


def _part_problem(part: str, data: object) -> str | None:
    """What is wrong with a record's trajectory or reasoning part, or None."""
    if not isinstance(data, dict):
        return f"has a {part} that is not an object"
    if part == "reasoning":
        problem = _wrong(data, _REASONING, _REASONING_OPTIONAL)
        for k, sample in enumerate(data.get("samples", []) if problem is None else [], 1):
            if not isinstance(sample, dict) or not _is(sample.get("answer"), (str, None)) or "call" not in sample:
                return f"has sample {k} without an answer (a string or null) and a call"
            problem = problem or _calls_problem([sample["call"]], f"sample {k} ")
        return problem
    problem = _wrong(data, _TRAJECTORY, _TRAJECTORY_OPTIONAL)
    for step in data.get("steps", []) if problem is None else []:
        if not isinstance(step, dict):
            return "has a step that is not an object"
        where = f"step {step.get('i', '?')} "
        problem = _wrong(step, _STEP, _STEP_OPTIONAL, where) or _calls_problem(step["calls"], where)
        action = step["action"] if problem is None else None
        if action is not None and not (len(action) == 2 and all(isinstance(a, str) for a in action)):
            problem = f"has {where}action {json.dumps(action)[:40]}, which is not [verb, argument]"
        if problem:
            return problem
    return problem


def _problem(record: object) -> str | None:
    """What is wrong with a parsed result line, or None."""
    if not isinstance(record, dict):
        return "is not a result line"
    problem = _wrong(record, _FIELDS, _OPTIONAL)
    if problem:
        return problem
    if not all(v is None or (_is(v, (int,)) and v >= 0) for v in record["tokens"].values()):
        return "has 'tokens' that are not whole numbers of at least 0"
    if not all(isinstance(url, str) for url in record.get("lost_on", [])):
        return "has 'lost_on' entries that are not servers' addresses (strings)"
    problem = _task_problem(record)
    if problem:
        return problem
    if "trajectory" not in record:
        return "has no 'trajectory'"
    if record.get("trajectory") is None and record.get("reasoning") is None:
        return "has neither a trajectory nor a reasoning part"
    for part, read in PARTS.items():
        if record.get(part) is None:
            continue
        problem = _part_problem(part, record[part])
        if problem:
            return f"has a {part} that cannot be read ({problem.removeprefix('has ')})"
        try:
            read(record[part])
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            return f"has a {part} that cannot be read ({type(error).__name__}: {error})"
    return _trials_problem(record)


def _task_problem(record: dict, task: TaskType | None = None, where: str = "") -> str | None:
    """What is wrong with a record's task and the fields its task type declares (`core.tasks`), or None; for a
    trial (`where`, of a record of type `task`), its own outcome. A score lies in its declared range."""
    if task is None:
        name = record.get("task")
        if name is not None and name not in TASK_TYPES:
            names = list(TASK_TYPES)
            return f"has 'task' = {json.dumps(name)[:40]}, which is not {', '.join(names[:-1])} or {names[-1]}"
        task = task_type(name)
    if task.scoring != "outcome":
        return _wrong(record, {}, dict(task.fields))
    required = {k: v for k, v in task.fields.items() if k in task.keys}
    problem = _wrong(record, required, {} if where else dict(task.fields), where)
    for score in task.scores if problem is None else []:
        value = record[score.key]
        if value is not None and not (value in (0, 1) if score.share else score.low <= value <= score.high):
            return f"has {where}'{score.key}' = {json.dumps(value)}, where {score.said}"
    return problem


_TRIAL = {"trial": (int,), "passed": (bool,), "answer": (str,), "em": (*_NUMBER, None), "model_calls": (int,)}


def _trials_problem(record: dict) -> str | None:
    """What is wrong with a Reflexion record's trials, or None (a record of another method has none)."""
    answering = record.get("trajectory") or record.get("reasoning")
    for k, trial in enumerate(record.get("trials", []), 1):
        if not isinstance(trial, dict):
            return f"has trial {k} that is not an object"
        problem = _wrong(trial, _TRIAL, {"tokens": (dict,)}, f"trial {k} ")
        task = task_type(record.get("task"))
        if task.scoring == "outcome":  # a trial the environment judged has the outcome's own scores
            problem = problem or _task_problem(trial, task, f"trial {k} ")
        if problem:
            return problem
        try:
            read_trial(trial, answering["prompt"])
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            return f"has trial {k} that cannot be read ({type(error).__name__}: {error})"
    return None


def read_trial(data: dict, prompt: str) -> Trial:
    """One trial of a Reflexion record, with the run's few-shot prompt put back."""
    return Trial.from_dict(data, prompt)


# The parts of a record that carry a prompt, which the manifest stores once, and their readers.
PARTS = {"trajectory": Trajectory.from_dict, "reasoning": Reasoning.from_dict}


def parse_records(path: Path, data: bytes, prompts: dict[str, str]) -> list[dict]:
    """The whole lines of a run file, each checked and with its few-shot prompt put back from `prompts`."""
    records, seen = [], set()
    # Lines end at b"\n" only: str.splitlines() would also break at U+2028, U+0085 and the like,
    # which JSON written with ensure_ascii=False carries raw inside strings.
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise DataError(
                f"{path} line {number} is not a result line; was the file edited? remove that line"
            ) from None
        for part in PARTS:
            found = record.get(part) if isinstance(record, dict) else None
            if isinstance(found, dict) and "prompt" not in found and "prompt_sha256" in found:
                text = prompts.get(found.pop("prompt_sha256"))
                if text is None:
                    raise DataError(
                        f"{path} line {number}: its prompt is not in the manifest {manifest_path(path).name}; "
                        "restore the manifest that came with the run file"
                    )
                found["prompt"] = text
        problem = _problem(record)
        if problem is not None:
            raise DataError(f"{path} line {number} {problem}; was the file edited? fix or remove that line")
        if record["id"] in seen:
            raise DataError(f"{path} line {number} repeats the question {record['id']!r}; remove one of the two")
        seen.add(record["id"])
        records.append(record)
    return records


def text_sha256(text: str) -> str:
    """The SHA-256 a manifest keys a few-shot prompt by."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
