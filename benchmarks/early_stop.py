"""What stopping a step's call at its complete action line saves (issue 42 item 2), and what it changes.

Each question runs twice on the embedded model, greedy, in the tolerant loop: with the stop sequences the
loop had before (`\\nObservation i:` alone) and with today's (`loop.step_stops`: also `]` and its line
break), in alternating order, so load on the machine falls on both alike. It prints, per setting, CPU and
wall seconds a question, generated tokens, model calls, steps, invalid actions, fallback calls, EM and F1,
and how many answers and actions differ. CPU time counts every thread of this process (the engine decodes
in its own), so it holds on a busy machine where wall time does not.

    RAWREACT_HOTPOTQA=dev.json python benchmarks/early_stop.py [--limit 100]
"""

import argparse
import os
import statistics
import time

from rawreact import load_collection, load_model, load_prompt, run_questions
from rawreact.agents import loop
from rawreact.core.actions import parse_step
from rawreact.models.base import cut_at_stop
from rawreact.models.cores import cpu_name

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")


def observation_only(i: int) -> list[str]:
    return [f"\nObservation {i}:"]


SETTINGS = {"before": observation_only, "action line": loop.step_stops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--data", default=os.environ.get("RAWREACT_HOTPOTQA"))
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    data = load_collection(args.data)
    model, prompt = load_model("gemma3-270m"), load_prompt()
    rows = {name: [] for name in SETTINGS}
    load = os.getloadavg()
    for n, question in enumerate(data.questions[: args.limit]):
        order = list(SETTINGS) if n % 2 == 0 else list(reversed(SETTINGS))
        for name in order:
            loop.step_stops = SETTINGS[name]  # the loop looks it up at each step
            cpu, wall = time.process_time(), time.perf_counter()
            [result] = run_questions([question], data.env, model, prompt)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            out = result.outcome
            rows[name].append(
                {
                    "cpu": cpu,
                    "wall": wall,
                    "generated": out.tokens()["completion"],
                    "calls": out.model_calls,
                    "steps": len(out.steps),
                    "invalid": out.invalid_actions,
                    "fallback": out.fallback_calls,
                    "em": result.em or 0.0,
                    "f1": result.f1 or 0.0,
                    "answer": out.answer,
                    "actions": [s.action_text for s in out.steps],
                    "texts": [s.calls[0].text for s in out.steps if s.calls],
                }
            )
    loop.step_stops = SETTINGS["action line"]
    print(f"{args.limit} questions of {args.data}, Gemma 270M greedy, 1 worker; load {load[0]:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end")  # fmt: skip
    base = rows["before"]
    for name, found in rows.items():
        mean = {k: statistics.fmean(r[k] for r in found) for k in ("cpu", "wall", "generated", "calls", "steps")}
        mean |= {k: statistics.fmean(r[k] for r in found) for k in ("invalid", "fallback", "em", "f1")}
        same_answer = sum(a["answer"] == b["answer"] for a, b in zip(found, base, strict=True))
        same_actions = sum(a["actions"] == b["actions"] for a, b in zip(found, base, strict=True))
        print(
            f"{name:12} CPU {mean['cpu']:.2f} s/q ({statistics.fmean(r['cpu'] for r in base) / mean['cpu']:.2f}x "
            f"fewer than before), wall {mean['wall']:.2f} s/q, {mean['generated']:.1f} generated tokens/q, "
            f"{mean['calls']:.2f} calls, {mean['steps']:.2f} steps, {mean['invalid']:.2f} invalid, "
            f"{mean['fallback']:.2f} fallback, EM {mean['em']:.3f}, F1 {mean['f1']:.3f}; "
            f"same answer {same_answer}/{len(found)}, same actions {same_actions}/{len(found)}"
        )
    # Whether the stop can lose what the model wrote: every call made before, read whole and read as cut at
    # today's stop (the text before its first `]` and line break), must give the same action.
    texts = [text for row in base for text in row["texts"]]
    kept = sum(parse_step(text)[1] == parse_step(cut_at_stop(text, ["]\n"])[0])[1] for text in texts)
    print(f"calls made before, read whole and read as cut at the action line: the same action in {kept}/{len(texts)}")


if __name__ == "__main__":
    main()
