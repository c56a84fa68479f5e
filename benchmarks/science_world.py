"""ScienceWorld on the embedded model (issue 57): ReAct and Act, free and under the commands grammar.

Plays the first test variation of each of ScienceWorld's 30 tasks (`scienceworld:test_mini_mini`, under
SwiftSage's `easy` simplifications and the simulator's limit of 100 steps) four ways on Gemma 3 270M, greedy,
in rawreact's game loop: ReAct and Act, each free and with the step's valid action-object combinations as a
grammar. The four settings take turns episode by episode, in an order that rotates, so load on the machine
falls on all alike. It prints, per setting: ScienceWorld's score (0 to 100), success (score 100), invalid
commands a step (lines the simulator did not list as valid, and lines with none), steps, prompt tokens a
call (SwiftSage counts ReAct's at 1,971 on GPT-4) and the tokens llama.cpp evaluated a call (the rest it
kept from the call before), and CPU seconds an episode: this process's (the model, every thread) and the
JVM's (the simulator). Then, for the grammar: the valid combinations a step, the milliseconds to write
the step's grammar, and a call's seconds under it beside a free call's, in the same run.

    python benchmarks/science_world.py [--data scienceworld:test_mini_mini] [--max-steps 30] [--threads 2]
"""

import argparse
import os
import statistics
import threading
import time
from collections import Counter
from pathlib import Path

from rawreact import load_collection, load_model, load_prompt, solve
from rawreact.agents.commands import load_commands_grammar
from rawreact.environments.scienceworld import SIMULATOR
from rawreact.models.cores import cpu_name, process_seconds

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

SETTINGS = [("react", False), ("react", True), ("act", False), ("act", True)]


class TimedGrammar:
    """The commands grammar, timing how long each step's grammar takes to write and how many commands it holds."""

    def __init__(self, grammar) -> None:
        self.grammar, self.mode, self.name = grammar, grammar.mode, grammar.name
        self.seconds: list[float] = []
        self.sizes: list[int] = []

    def for_commands(self, commands, thoughts=True, verbs=None):
        start = time.perf_counter()
        commands = list(commands)
        text = self.grammar.for_commands(commands, thoughts, *([verbs] if verbs is not None else []))
        self.seconds.append(time.perf_counter() - start)
        self.sizes.append(len(commands))
        return text


def jvm_seconds() -> float:
    """CPU seconds the simulator's JVM has used (user and system), from /proc."""
    return process_seconds(SIMULATOR._env._gateway.java_process.pid) if SIMULATOR.running else 0.0


def simulator_threads(episodes: int = 4, steps: int = 40) -> None:
    """Whether one JVM serves several episodes at once: `episodes` episodes of `steps` commands each (a command and
    the valid combinations after it, as a step of the game loop asks), one after another and then on as many
    threads, in the same run; the wall time of each, and the JVM's CPU time."""
    from rawreact.environments.scienceworld import Episode, ScienceWorldEnv

    tasks = ["boil", "find-plant", "power-component", "chemistry-mix", "test-conductivity", "grow-plant"]

    def play(k: int) -> None:
        env = ScienceWorldEnv(Episode(tasks[k % len(tasks)], 0))
        env.reset()
        for n in range(steps):
            env.step("look around" if n % 2 else "wait1")

    timings = {}
    for label in ("one after another", "threads", "one after another", "threads"):  # each twice, in turn
        wall, jvm = time.perf_counter(), jvm_seconds()
        if label == "threads":
            running = [threading.Thread(target=play, args=(k,)) for k in range(episodes)]
            [t.start() for t in running]
            [t.join() for t in running]
        else:
            [play(k) for k in range(episodes)]
        timings.setdefault(label, []).append((time.perf_counter() - wall, jvm_seconds() - jvm))
    serial, threaded = (min(timings[k]) for k in ("one after another", "threads"))
    print(
        f"\none JVM, {episodes} episodes of {steps} steps: {serial[0]:.2f} s one after another, {threaded[0]:.2f} s on "
        f"{episodes} threads (ratio {serial[0] / threaded[0]:.2f}); JVM CPU {serial[1]:.2f} s and {threaded[1]:.2f} s; "
        f"the JVM holds {jvm_rss() / 1024:.0f} MB"
    )


def jvm_rss() -> float:
    """The JVM's resident memory in kB."""
    pid = SIMULATOR._env._gateway.java_process.pid
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return float(line.split()[1])
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="scienceworld:test_mini_mini")
    parser.add_argument("--max-steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--simulator-only", action="store_true", help="only the JVM's threads, no model")
    args = parser.parse_args()
    data = load_collection(args.data)
    if args.simulator_only:
        simulator_threads()
        return
    model = load_model("gemma3-270m", n_threads=args.threads, n_ctx=args.n_ctx)
    grammar = TimedGrammar(load_commands_grammar())
    prompts = {method: load_prompt(method=method, task="scienceworld") for method in ("react", "act")}
    rows = {setting: [] for setting in SETTINGS}
    load = os.getloadavg()
    for n, question in enumerate(data.questions):
        order = SETTINGS[n % len(SETTINGS) :] + SETTINGS[: n % len(SETTINGS)]
        for method, constrained in order:
            cpu, jvm, wall = time.process_time(), jvm_seconds(), time.perf_counter()
            out = solve(question.question, data.env(question), model, prompts[method], method=method,
                        grammar=grammar if constrained else None, max_steps=args.max_steps)  # fmt: skip
            traj = out.trajectory
            calls = [c for s in traj.steps for c in s.calls]
            rows[method, constrained].append(
                {
                    "score": 100 * (traj.reward or 0.0),
                    "won": traj.ended == "won",
                    "invalid": traj.invalid_actions,
                    "steps": len(traj.steps),
                    "calls": len(calls),
                    "prompt": sum(c.prompt_tokens for c in calls),
                    "evaluated": sum(c.evaluated_tokens or 0 for c in calls),
                    "call_seconds": sum(c.seconds for c in calls),
                    "cpu": time.process_time() - cpu,
                    "jvm": jvm_seconds() - jvm,
                    "wall": time.perf_counter() - wall,
                    "task": question.kind,
                    "ended": traj.ended,
                }
            )
        print(f"episode {n + 1}/{len(data.questions)} {question.id} done", flush=True)
    print(f"\n{len(data.questions)} episodes of {args.data}, up to {args.max_steps} steps each, Gemma 3 270M "
          f"(Q4_K_M), {args.threads} threads, on {cpu_name()}; load {load[0]:.1f} at start, "
          f"{os.getloadavg()[0]:.1f} at end\n")  # fmt: skip
    header = "| method | grammar | score | success | invalid/step | steps | prompt tok/call | eval tok/call "
    header += "| CPU s/episode | JVM CPU s/episode | wall s/episode | ended |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for (method, constrained), found in rows.items():
        steps, calls = sum(r["steps"] for r in found), sum(r["calls"] for r in found) or 1
        print(
            f"| {method} | {'commands' if constrained else 'off'} | {statistics.mean(r['score'] for r in found):.1f} "
            f"| {statistics.mean(r['won'] for r in found):.3f} | {sum(r['invalid'] for r in found) / steps:.2f} "
            f"| {steps / len(found):.1f} | {sum(r['prompt'] for r in found) / calls:.0f} "
            f"| {sum(r['evaluated'] for r in found) / calls:.0f} | {statistics.mean(r['cpu'] for r in found):.1f} "
            f"| {statistics.mean(r['jvm'] for r in found):.1f} | {statistics.mean(r['wall'] for r in found):.1f} "
            f"| {', '.join(f'{k} {v}' for k, v in Counter(r['ended'] for r in found).most_common())} |"
        )
    free = [r["call_seconds"] / r["calls"] for (m, c), found in rows.items() if not c for r in found if r["calls"]]
    held = [r["call_seconds"] / r["calls"] for (m, c), found in rows.items() if c for r in found if r["calls"]]
    print(
        f"\ncommands grammar: {statistics.mean(grammar.sizes):.0f} valid combinations a step (most "
        f"{max(grammar.sizes)}); writing a step's grammar took {1000 * statistics.mean(grammar.seconds):.1f} ms "
        f"(most {1000 * max(grammar.seconds):.1f} ms); a call took {statistics.mean(held):.2f} s under it and "
        f"{statistics.mean(free):.2f} s free (ratio {statistics.mean(held) / statistics.mean(free):.2f})"
    )
    by_task = {}
    for found in rows.values():
        for r in found:
            by_task.setdefault(r["task"], []).append(r["score"])
    print("\nscore by task (mean over the four settings): " + ", ".join(
        f"{task} {statistics.mean(scores):.0f}" for task, scores in by_task.items()))  # fmt: skip
    simulator_threads()


if __name__ == "__main__":
    main()
