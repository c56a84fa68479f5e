"""A run as an inspect-ai evaluation log (`inspect view` opens it), written as JSON without inspect-ai.

The log is inspect-ai's `EvalLog` in its JSON form (log format version 2): the task is the run's method, the
model its model, the dataset its question file, one sample a question. A sample's messages are the episode as
the model saw it: the few-shot prompt as the system message, the question, then each step's thought and action
(the model's turn) and the observation (the next user turn); a reasoning method's reply is one turn. Its scores
are rawreact's own: EM and F1 for a question, label accuracy for a FEVER claim (as `em`), success and reward
for a game; `results` gives each score's mean and standard error over the run. The manifest's config goes in
the log's metadata, so the log can be traced back to the run's inputs.
"""

import hashlib
import json
import math
import re
import time
from pathlib import Path

from rawreact import __version__
from rawreact.core.errors import DataError
from rawreact.core.tasks import of_records, task_type

VERSION = 2  # inspect-ai's log format version


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(seconds))


def _scores(record: dict) -> dict[str, float]:
    """A record's scores by name, as its task type declares them: EM and F1 (those it has), or an outcome's
    success and reward (a reward not known counts 0)."""
    task = task_type(record.get("task"))
    if task.scoring == "outcome":
        return {key: float(record.get(key) or 0.0) for key in task.keys}
    return {key: float(record[key]) for key in task.keys if record.get(key) is not None}


def _messages(record: dict) -> list[dict]:
    """The episode as the model saw it, as inspect-ai's chat messages."""
    trajectory, reasoning = record.get("trajectory"), record.get("reasoning")
    messages = []
    prompt = (trajectory or {}).get("prompt")
    if prompt:
        messages.append({"role": "system", "content": prompt})
    messages.append({"role": "user", "content": record["question"]})
    commands = task_type(record.get("task")).style == "commands"  # a game's lines, `> command` and what it said
    for step in (trajectory or {}).get("steps", []):
        i = step["i"]
        if commands:
            turn = f"> {step['action_text']}"
        else:
            turn = f"Action {i}: {step['action_text']}"
            turn = turn if step.get("thought") is None else f"Thought {i}: {step['thought']}\n{turn}"
        messages.append({"role": "assistant", "content": turn, "source": "generate"})
        if step.get("observation") or step.get("note"):
            said = f"{step.get('observation') or ''}{step.get('note') or ''}"
            said = said if commands else f"Observation {i}: {said}"
            messages.append({"role": "user", "content": said})
    if reasoning is not None:
        texts = [reasoning["call"]["text"]] if reasoning.get("call") else []
        texts += [sample["call"]["text"] for sample in reasoning.get("samples", []) if sample.get("call")]
        messages += [{"role": "assistant", "content": text.strip(), "source": "generate"} for text in texts]
    return messages


def _usage(record: dict) -> dict:
    tokens = record.get("tokens") or {}
    written, read = tokens.get("completion", 0) or 0, tokens.get("prompt", 0) or 0
    return {"input_tokens": read, "output_tokens": written, "total_tokens": read + written}


def _sample(record: dict, scored: dict[str, float], usage: dict, model: str) -> dict:
    """One question as an inspect-ai sample, with its scores (`_scores`) and token usage (`_usage`)."""
    answer = record.get("prediction") or ""
    scores = {name: {"value": value, "answer": answer} for name, value in scored.items()}
    metadata = {key: record.get(key) for key in ("ended", "steps", "model_calls", "invalid_actions", "branch")}
    return {
        "id": record["id"],
        "epoch": 1,
        "input": record["question"],
        "target": record.get("answer") or "",
        "messages": _messages(record),
        "output": {
            "model": model,
            "choices": [
                {"message": {"role": "assistant", "content": answer, "source": "generate"}, "stop_reason": "stop"}
            ],
            "completion": answer,
            "usage": usage,
        },  # fmt: skip
        "scores": scores,
        "metadata": metadata,
        "model_usage": {model: usage},
        "started_at": _iso(record.get("started")),
        "completed_at": _iso(record.get("finished")),
        "total_time": record.get("seconds"),
    }


def _metrics(values: list[float]) -> dict:
    n = len(values)
    mean = sum(values) / n
    stderr = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else 0.0
    return {"mean": {"name": "mean", "value": mean}, "stderr": {"name": "stderr", "value": stderr}}


def inspect_log(name: str, manifest: dict | None, records: list[dict]) -> dict:
    """The inspect-ai log of a run named `name` (its manifest, and its records as `read_run` gives them)."""
    if not records:
        raise DataError(f"{name} has no finished question to put in an inspect log")
    manifest = manifest or {}
    config = manifest.get("config", {})
    method = config.get("method") or records[0].get("method") or "react"
    model = f"rawreact/{manifest.get('model_name') or config.get('model') or 'model'}"
    digest = hashlib.sha256(json.dumps([name, manifest.get("created"), config], sort_keys=True).encode()).hexdigest()
    scored, usages = [_scores(r) for r in records], [_usage(r) for r in records]
    names = list(dict.fromkeys(score for scores in scored for score in scores))
    total = {key: sum(usage[key] for usage in usages) for key in ("input_tokens", "output_tokens", "total_tokens")}
    started = min((r["started"] for r in records if r.get("started")), default=None)
    finished = max((r["finished"] for r in records if r.get("finished")), default=None)
    return {
        "version": VERSION,
        "status": "success" if len(records) >= (manifest.get("questions") or 0) else "started",
        "eval": {
            "eval_id": digest[:22],
            "run_id": digest[22:44],
            "created": manifest.get("created") or _iso(started) or _iso(time.time()),
            # the task type and the data's name beside the method, so a QA run and a game run are told apart
            "task": f"rawreact/{of_records(records).name}/{Path(manifest.get('data') or 'demo').stem}/{method}",
            "task_id": digest[:22],
            "task_version": 0,
            "task_display_name": name,
            "dataset": {
                "name": Path(manifest.get("data") or "demo").name,
                "location": manifest.get("data"),
                "samples": len(records),
                "sample_ids": [r["id"] for r in records],
                "shuffled": bool(config.get("shuffle")),
            },
            "model": model,
            "model_args": {"threads": manifest.get("threads"), "workers": manifest.get("workers")},
            "model_generate_config": {
                "temperature": config.get("temperature"),
                "seed": config.get("seed"),
                "max_tokens": config.get("max_tokens"),
            },  # fmt: skip
            "config": {},
            "packages": {"rawreact": manifest.get("rawreact") or __version__},
            "metadata": {"rawreact_run": name, "rawreact_config": config},
        },
        "plan": {"name": "plan", "steps": [{"solver": f"rawreact/{method}", "params": {"loop": config.get("loop")}}]},
        "results": {
            "total_samples": len(records),
            "completed_samples": len(records),
            "scores": [
                {
                    "name": score,
                    "scorer": score,
                    "scored_samples": sum(score in scores for scores in scored),
                    "metrics": _metrics([scores[score] for scores in scored if score in scores]),
                }
                for score in names
            ],
        },
        "stats": {
            "started_at": _iso(started) or "",
            "completed_at": _iso(finished) or "",
            "model_usage": {model: total},
        },  # fmt: skip
        "samples": [_sample(r, s, u, model) for r, s, u in zip(records, scored, usages, strict=True)],
    }


_LONE = re.compile("[\ud800-\udfff]")  # a surrogate in a str is always alone: a pair is one code point


def _shown_escaped(text: str) -> str:
    """JSON text with each lone surrogate (text no UTF-8 can hold) written as its escape, `\\udc80`, in
    letters: inspect-ai's reader refuses a JSON escape of one, so the log shows it as the run file keeps it."""
    return _LONE.sub(lambda found: f"\\\\u{ord(found.group()):04x}", text)


def write_inspect_logs(runs: dict[str, tuple[dict | None, list[dict]]], folder: str | Path) -> list[Path]:
    """Write each run's inspect log into `folder` (`inspect view --log-dir FOLDER` lists them); the paths.

    Every log is made before the first is written, so a run that cannot be logged writes none; each is
    written whole or not at all (a `.part` file renamed into place, removed on any error), with a lone
    surrogate (which UTF-8 cannot hold) shown as its escape."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"--inspect {folder} is a file; give a folder for the logs, such as logs")
    logs = [(name, inspect_log(name, manifest, records)) for name, (manifest, records) in runs.items()]
    written = []
    for name, log in logs:
        stamp = log["eval"]["created"][:19].replace(":", "-")
        path = folder / f"{stamp}_{Path(name).stem}_{log['eval']['eval_id']}.json"
        temporary = path.with_name(path.name + ".part")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            temporary.write_text(_shown_escaped(json.dumps(log, ensure_ascii=False, indent=1)), encoding="utf-8")
            temporary.replace(path)
        except OSError as error:
            raise DataError(f"{path}: cannot write the inspect log: {error.strerror}") from None
        finally:
            temporary.unlink(missing_ok=True)
        written.append(path)
    return written
