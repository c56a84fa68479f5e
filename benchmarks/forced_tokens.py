"""How many tokens a grammar forces, and what finding them out costs (issue 42 item 3).

A token the grammar leaves as the only continuation needs no logits: the pass that computes them could be skipped.
This runs ReAct episodes under a grammar on Gemma 270M and, after every token the grammar accepts, asks llama.cpp's
grammar about the whole vocabulary: how many tokens it allows next (1: a forced token; only end-of-text tokens: the
text is complete, and the pass after it only finds the end), and how long that question takes, beside the cost of
a decode pass in the same run (the time inside llama_decode, which at one thread is its CPU time).

    RAWREACT_HOTPOTQA=FILE python benchmarks/forced_tokens.py [--limit 3] [--grammar step]
"""

import argparse
import os
import time

import numpy as np

from rawreact import load_collection, load_model, load_prompt, react
from rawreact.models import gbnf
from rawreact.models.cores import cpu_name
from rawreact.models.gbnf import GrammarSampler

# A cost measured here includes computing the few-shot prefix, as it always did: no state kept by another process
# is read (models.states), unless RAWREACT_STATES names a folder.
os.environ.setdefault("RAWREACT_STATES", "off")

SAMPLE = os.environ.get("RAWREACT_HOTPOTQA")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=SAMPLE, required=SAMPLE is None, help="default: RAWREACT_HOTPOTQA")
    parser.add_argument("--limit", type=int, default=3)
    parser.add_argument("--grammar", default="step", choices=["step", "action", "titles"])
    args = parser.parse_args()
    print(f"on {cpu_name()}", flush=True)
    model = load_model("gemma3-270m", n_threads=1)
    vocab, is_eog = model.llm._model.vocab, gbnf.llama_cpp_module().llama_vocab_is_eog
    allowed, ends, scans = [], [], []
    accept = GrammarSampler.accept

    def counted(self, token: int) -> None:
        accept(self, token)
        start = time.process_time()
        ok = np.flatnonzero(self.allowed_all())
        scans.append(time.process_time() - start)
        allowed.append(len(ok))
        ends.append(len(ok) > 0 and all(is_eog(vocab, int(t)) for t in ok))

    GrammarSampler.accept = counted
    data = load_collection(args.data)
    for question in data.questions[: args.limit]:
        react(question.question, data.env(question), model, load_prompt(), grammar=args.grammar, max_steps=7)
    stats, allowed = model.engine.stats, np.array(allowed)
    print(f"{args.limit} questions, grammar {args.grammar}: {len(allowed)} tokens picked under the grammar")
    print(f"  followed by exactly one allowed token (forced): {int((allowed == 1).sum())}")
    print(f"  followed by end-of-text tokens only (the text is complete): {sum(ends)}")
    print(f"  median allowed tokens next: {int(np.median(allowed))}")
    print(f"  asking the grammar about the whole vocabulary: {1000 * np.median(scans):.1f} ms median (CPU)")
    ms = 1000 * stats.seconds / stats.passes
    print(f"  a decode pass in the same run: {ms:.1f} ms in llama_decode ({stats.passes} passes)")


if __name__ == "__main__":
    main()
