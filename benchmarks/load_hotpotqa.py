"""How long loading a full-size HotpotQA dev file takes, against reading its JSON alone.

The official dev file (7,405 questions, 46 MB) is not on this machine, so this builds one of the
same size and layout from a smaller sample in the official layout (each row repeated with its own `_id`),
then times `load_collection` on it and, as the baseline in the same run, `json.load` of the same
file: the difference is what rawreact adds (checking every row, building each question's passages).

    python benchmarks/load_hotpotqa.py [--sample FILE] [--rows 7405]
"""

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from rawreact import load_collection
from rawreact.models.cores import cpu_name

SAMPLE = os.environ.get("RAWREACT_HOTPOTQA")  # a HotpotQA file in the official layout


def best_of(runs: int, work) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sample",
        default=SAMPLE,
        required=SAMPLE is None,
        help="a HotpotQA file in the official layout (default: RAWREACT_HOTPOTQA)",
    )
    parser.add_argument("--rows", type=int, default=7405)
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    sample = json.loads(Path(args.sample).read_text(encoding="utf-8"))
    rows = [{"_id": f"row{i}", **sample[i % len(sample)]} for i in range(args.rows)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dev.json"
        path.write_text(json.dumps(rows), encoding="utf-8")
        size = path.stat().st_size / 1e6
        parse = best_of(3, lambda: json.loads(path.read_text(encoding="utf-8")))
        load = best_of(3, lambda: load_collection(path))
        n = len(load_collection(path).questions)
    print(
        f"{n} questions, {size:.0f} MB: load_collection {load:.2f} s, json.loads alone {parse:.2f} s "
        f"({load / parse:.1f}x the bare parse)"
    )


if __name__ == "__main__":
    main()
