"""Framework overhead per ReAct step, without model time.

Runs scripted episodes over the demo collection: each episode searches a title (a hit), searches
a misspelt title (a miss, with the similar-titles ranking), looks a word up, thinks, and finishes.
Everything but the model's thinking is real: stop handling, parsing, the environment, prompt growth
and the trajectory record. As a baseline measured in the same run, the same completions go through
a bare loop in the reference notebook's style (split on "\\nAction i: ", dictionary lookup, no
record), so the ratio shows what rawreact's tolerance and bookkeeping cost.

    python benchmarks/loop_overhead.py [--episodes 2000]
"""

import argparse
import time

from rawreact import ScriptedModel, load_collection, load_prompt, react
from rawreact.models.cores import cpu_name


def _script(collection):
    """Five completions per question: the steps described in the module docstring."""
    texts = []
    for q in collection.questions:
        title = q.supporting[0]
        texts += [
            f" I need to search {title}.\nAction 1: Search[{title}]\nObservation 1: invented",
            f" Now {title[:-2]}.\nAction 2: Search[{title[:-2]}]",
            " Look up a year.\nAction 3: Lookup[the]",
            " Think it over.\nAction 4: Think[which one]",
            f" Done.\nAction 5: Finish[{q.answer}]",
        ]
    return texts


def run_rawreact(collection, prompt, texts, episodes):
    steps = 0
    per_question = len(texts) // len(collection.questions)
    env = collection.env()
    for e in range(episodes):
        n = e % len(collection.questions)
        model = ScriptedModel(texts[n * per_question : (n + 1) * per_question])
        traj = react(collection.questions[n].question, env, model, prompt)
        assert traj.ended == "finish"
        steps += len(traj.steps)
    return steps


def run_reference_style(collection, prompt, texts, episodes):
    """A bare loop in the shape of the reference notebook, with an exact-title dictionary env."""
    pages = {t.lower(): p for t, p in collection.passages.items()}
    per_question = len(texts) // len(collection.questions)
    steps = 0
    for e in range(episodes):
        n = e % len(collection.questions)
        script = iter(texts[n * per_question : (n + 1) * per_question])
        text = prompt.text + f"Question: {collection.questions[n].question}\n"
        for i in range(1, 8):
            out = next(script).split(f"\nObservation {i}:")[0]
            thought, action = out.strip().split(f"\nAction {i}: ")
            verb, arg = action[: action.index("[")].lower(), action[action.index("[") + 1 : -1]
            if verb == "search":
                page = pages.get(arg.lower())
                obs = " ".join(page.split(". ")[:2]) if page else f"Could not find {arg}. Similar: []."
            else:
                obs = "Nice thought." if verb != "finish" else "Episode finished."
            text += f"Thought {i}: {thought}\nAction {i}: {action}\nObservation {i}: {obs}\n"
            steps += 1
            if verb == "finish":
                break
    return steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000)
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    collection, prompt = load_collection(), load_prompt()
    texts = _script(collection)
    results = {}
    for name, run in (("reference-style bare loop", run_reference_style), ("rawreact react()", run_rawreact)):
        run(collection, prompt, texts, 50)  # warm up
        start = time.perf_counter()
        steps = run(collection, prompt, texts, args.episodes)
        seconds = time.perf_counter() - start
        results[name] = steps / seconds
        print(f"{name:28s} {args.episodes} episodes, {steps} steps in {seconds:.2f} s: {steps / seconds:,.0f} steps/s")
    ours, base = results["rawreact react()"], results["reference-style bare loop"]
    print(f"rawreact steps/s: {ours:,.0f} (target 20,000); {ours / base:.2f}x the bare loop's rate")


if __name__ == "__main__":
    main()
