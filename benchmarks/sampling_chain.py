"""How much of the distribution llama.cpp's default sampling chain never draws, where the reference repositories
sample the whole of it (docs/reference.md, P10): at each token of a greedy implementation of a HumanEval problem,
the mass that the distribution at temperature T puts outside what the chain keeps (top-k 40, top-p 0.95 and
min-p 0.05 of the untempered distribution: `rawreact.models.llama.chain`, what `pick` draws from), for the
temperatures the repositories sample at (0.2: a chat's tests and reflections; 0.8: LATS's implementations).

    python benchmarks/sampling_chain.py [--model qwen2.5-coder-1.5b] [--problems 0-4] [--tokens 96] [--threads 2]

It prints, for each temperature, the mean mass cut a token, the share of tokens where more than 1% is cut, and
the mean over problems of the chance that a draw of the whole distribution stays, token after token along the
greedy path, inside what the chain keeps (a rough share of the repositories' draws that rawreact's could equal).
"""

import argparse
import math
import os

import numpy as np
from pass_cost import decode, llama_cpp  # run as a script: its folder is on the path

from rawreact import load_model
from rawreact.models.batch import Engine
from rawreact.models.cores import cpu_name
from rawreact.models.llama import chain
from rawreact.tasks.loading import load_collection

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")


def cut(logits: np.ndarray, temperature: float) -> float:
    """The mass of the distribution at `temperature` outside the tokens the chain keeps (`llama.chain`, what `pick`
    draws from)."""
    kept, _ = chain(logits)
    whole = np.exp((logits.astype(np.float64) - logits.max()) / temperature)
    return float(1.0 - whole[kept].sum() / whole.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--problems", default="0-4", help="HumanEval's problems, as `rawreact run humaneval:` reads")
    parser.add_argument("--tokens", type=int, default=96, help="tokens of each greedy implementation")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"on {cpu_name()}; {args.model}, problems {args.problems}, {args.tokens} tokens each", flush=True)
    model = load_model(args.model, n_ctx=2048, n_threads=args.threads)
    temperatures = (0.2, 0.8)
    cuts: dict[float, list[float]] = {t: [] for t in temperatures}
    inside: dict[float, list[float]] = {t: [] for t in temperatures}
    for question in load_collection(f"humaneval:{args.problems}").questions:
        engine = Engine(model.llm, streams=1, n_ctx=2048, n_threads=args.threads)
        tokens = model.tokenize(question.row["prompt"])
        starts = range(0, len(tokens), 256)
        for at in starts:
            decode(engine, tokens[at : at + 256], at, False)
        row = len(tokens) - starts[-1] - 1  # the prompt's last token, in the last pass
        position, logs = len(tokens), dict.fromkeys(temperatures, 0.0)
        for _ in range(args.tokens):
            logits = np.array(engine._logits(row))
            for t in temperatures:
                lost = cut(logits, t)
                cuts[t].append(lost)
                logs[t] += math.log(max(1.0 - lost, 1e-300))
            token = int(np.argmax(logits))
            if llama_cpp.llama_vocab_is_eog(llama_cpp.llama_model_get_vocab(model.llm.model), token):
                break
            decode(engine, [token], position, False)
            position, row = position + 1, 0
        for t in temperatures:
            inside[t].append(math.exp(logs[t]))
        engine.close()
        print(f"{question.id}: {position - len(tokens)} tokens", flush=True)
    print("\n| temperature | tokens | mean mass cut a token | tokens with over 1% cut | a draw inside the chain |")
    print("| --- | --- | --- | --- | --- |")
    for t in temperatures:
        found = cuts[t]
        over = sum(c > 0.01 for c in found) / len(found)
        print(f"| {t} | {len(found)} | {np.mean(found):.4f} | {over:.3f} | {np.mean(inside[t]):.3f} |")


if __name__ == "__main__":
    main()
