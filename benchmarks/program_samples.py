"""Programs on the embedded model (issue 69): what decoding a problem's samples together saves.

Two program methods sample: `lats` (each expansion, `--lats-samples` implementations of one prompt) and `simple`
with `--samples N` (N implementations of a problem, for pass@k). The embedded model evaluates the prompt once and
decodes its samples together, a token of each in one pass. As benchmarks/lats.py does for LATS over questions,
this runs each problem once (together), records every call of the sampling context, then replays the calls side
by side and one by one (each sample started from the prompt's cells, decoded alone), in turns whose order rotates
problem by problem; both replays compute the same tokens. It prints CPU seconds a problem (this process, every
thread) of the run and of each replay, and the ratio.

    python benchmarks/program_samples.py [--model gemma3-270m] [--problems 0-4] [--method lats|simple]
        [--samples 5] [--iterations 2] [--threads 1]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from lats import Recorder, replay  # noqa: E402  (the LATS benchmark's recorder and replay)

from rawreact import load_model  # noqa: E402
from rawreact.agents import programs  # noqa: E402
from rawreact.agents.programs import ProgramPrompts  # noqa: E402
from rawreact.models.cores import cpu_name  # noqa: E402
from rawreact.tasks.loading import load_collection  # noqa: E402

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--prompt", help="a folder of program prompts, or chat (default: the completion prompts)")
    parser.add_argument("--problems", default="0-4", help="HumanEval's problems (default: 0-4)")
    parser.add_argument("--method", choices=("lats", "simple"), default="lats")
    parser.add_argument("--samples", type=int, default=5, help="LATS's children an expansion, or simple's samples")
    parser.add_argument("--iterations", type=int, default=2, help="LATS's iterations (default: 2)")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    data = load_collection(f"humaneval:{args.problems}")
    model = load_model(args.model, n_threads=args.threads)
    folder = None
    if args.prompt == "chat":
        from rawreact.core.resources import resource

        folder = f"{resource('prompts', 'programs/chat')}/"
    elif args.prompt:
        folder = args.prompt
    prompts = ProgramPrompts.load(folder)
    recorder = Recorder()
    print(f"{cpu_name()}, {args.threads} llama.cpp threads; {args.model}; {len(data.questions)} problems, "
          f"{args.method} with {args.samples} samples a call at T {args.temperature:g}", flush=True)  # fmt: skip
    rows = []
    for k, question in enumerate(data.questions):
        env = data.env(question)
        recorder.calls, recorder.on = [], True
        cpu, wall = time.process_time(), time.perf_counter()
        if args.method == "lats":
            trajectory, _ = programs.lats(env, model, prompts, iterations=args.iterations, children=args.samples,
                                          temperature=args.temperature)  # fmt: skip
        else:
            trajectory, _ = programs.simple(env, model, prompts, samples=args.samples, temperature=args.temperature)
        cpu, wall, recorder.on = time.process_time() - cpu, time.perf_counter() - wall, False
        calls = [(kind, made) for kind, made in recorder.calls if len(made) > 1]
        if not calls:
            print(f"  {question.id}: no call sampled (its first implementation passed its own tests)", flush=True)
            continue
        row = {"run": cpu}
        for together in [True, False] if k % 2 == 0 else [False, True]:
            row[together] = replay(model, calls, together, args.temperature)
        row["written"] = sum(len(r[4]) for _, made in calls for r in made)
        rows.append(row)
        print(f"  {question.id}: {trajectory.ended}; run {cpu:6.1f} CPU s ({wall:5.1f} s); "
              f"{sum(len(m) for _, m in calls)} samples in {len(calls)} calls, {row['written']} tokens; replayed "
              f"together {row[True][0]:6.1f} CPU s ({row[True][2]} passes), one by one {row[False][0]:6.1f} "
              f"({row[False][2]} passes): {row[False][0] / row[True][0]:.2f}x", flush=True)  # fmt: skip
    if not rows:
        print("no problem sampled; nothing to compare")
        return 0
    ratio = sum(r[False][0] for r in rows) / sum(r[True][0] for r in rows)
    each = [r[False][0] / r[True][0] for r in rows]
    print(f"{len(rows)} problems that sampled: replayed together {statistics.fmean(r[True][0] for r in rows):.1f} "
          f"CPU s a problem, one by one {statistics.fmean(r[False][0] for r in rows):.1f}: one by one costs "
          f"{ratio:.2f}x (a problem {min(each):.2f}x to {max(each):.2f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
