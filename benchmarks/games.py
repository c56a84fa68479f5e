"""Text games on the embedded model (issue 41): ReAct and Act, free and under the commands grammar.

Makes a set of TextWorld games (offline, seeded) unless `--games DIR` names one, then plays each game
four ways on Gemma 3 270M, greedy, in the game loop (alfworld.ipynb's): ReAct and Act, each free and
with the admissible commands as a grammar. The four settings take turns game by game, in an order that
rotates, so load on the machine falls on all alike. It prints, per setting: success (games won), mean
reward, invalid commands a step (commands the game did not admit, and lines with none), steps, generated
and evaluated tokens, and CPU seconds a game (every thread of this process), beside wall seconds.

    python benchmarks/games.py [--games DIR] [--seeds 1-3] [--max-steps 49]
"""

import argparse
import os
import statistics
import tempfile
import time

from rawreact import load_collection, load_model, load_prompt, solve
from rawreact.agents.commands import load_commands_grammar
from rawreact.cli.files import parse_seeds
from rawreact.models.cores import cpu_name
from rawreact.tasks.games import make_games

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

RECIPES = ["coin:2", "coin:4", "treasure:3", "cooking:1"]
SETTINGS = [("react", False), ("react", True), ("act", False), ("act", True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", help="a folder of games (default: make the recipes' games in a temporary one)")
    parser.add_argument("--recipe", action="append", help=f"recipes to make (default: {', '.join(RECIPES)})")
    parser.add_argument("--seeds", default="1-3")
    parser.add_argument("--max-steps", type=int, default=49)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    folder = args.games or tempfile.mkdtemp(prefix="rawreact-games-")
    if not args.games:
        make_games(folder, args.recipe or RECIPES, parse_seeds(args.seeds))
    data = load_collection(folder)
    model = load_model("gemma3-270m", n_threads=args.threads)
    grammar = load_commands_grammar()
    prompts = {method: load_prompt(method=method, task="game") for method in ("react", "act")}
    rows = {setting: [] for setting in SETTINGS}
    load = os.getloadavg()
    for n, question in enumerate(data.questions):
        order = SETTINGS[n % len(SETTINGS) :] + SETTINGS[: n % len(SETTINGS)]
        for method, constrained in order:
            cpu, wall = time.process_time(), time.perf_counter()
            out = solve(question.question, data.env(question), model, prompts[method], method=method,
                        grammar=grammar if constrained else None, max_steps=args.max_steps)  # fmt: skip
            traj = out.trajectory
            rows[method, constrained].append(
                {
                    "won": traj.ended == "won",
                    "reward": traj.reward,
                    "invalid": traj.invalid_actions,
                    "steps": len(traj.steps),
                    "generated": out.tokens()["completion"],
                    "evaluated": out.tokens()["evaluated"] or 0,
                    "cpu": time.process_time() - cpu,
                    "wall": time.perf_counter() - wall,
                }
            )
        print(f"game {n + 1}/{len(data.questions)} {question.id} done", flush=True)
    print(f"\n{len(data.questions)} games from {folder}; load {load[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    header = "| method | grammar | success | reward | invalid/step | steps/game | gen tok/game | eval tok/game "
    header += "| CPU s/game | wall s/game |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for (method, constrained), found in rows.items():
        steps = sum(r["steps"] for r in found)
        print(
            f"| {method} | {'commands' if constrained else 'off'} | {statistics.mean(r['won'] for r in found):.3f} "
            f"| {statistics.mean(r['reward'] for r in found):.3f} | {sum(r['invalid'] for r in found) / steps:.2f} "
            f"| {steps / len(found):.1f} | {statistics.mean(r['generated'] for r in found):.0f} "
            f"| {statistics.mean(r['evaluated'] for r in found):.0f} | {statistics.mean(r['cpu'] for r in found):.1f} "
            f"| {statistics.mean(r['wall'] for r in found):.1f} |"
        )


if __name__ == "__main__":
    main()
