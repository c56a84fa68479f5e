"""Run the ReAct paper's HotpotQA protocol on your model and data, then print its summary.

    python scripts/reproduce_hotpotqa.py hotpot_dev_distractor_v1.json --reference ~/ReAct \\
        --model my-model.gguf --out hotpotqa-500.jsonl [--pooled] [any other `rawreact run` option]

`--reference DIR` (your checkout of the reference repository) takes the paper's whole setup from it:
its prompts (`prompts/prompts_naive.json`, a key per method), the instruction of its
`hotpotqa.ipynb`, the reference loop and environment, 5 sentences per search, 7 steps, the 500
questions the notebook draws (indices shuffled by `random.Random(233)` over `range(7405)`) and its
scoring; the run prints which parts are the paper's and which are not. Without it, the protocol's
settings alone run with rawreact's own prompts (the sample, 7 steps, 5 sentences per search;
`--loop reference` for the notebook's loop). Options you give override the protocol's (`--limit 20`
makes a short first try). `--pooled` searches every question's paragraphs pooled in one store
instead of each question's own ten (see the README on the distractor leak). The run resumes if it
was interrupted: run the same command again.
"""

import sys

from rawreact.cli.reproduce import reproduce

if __name__ == "__main__":
    sys.exit(reproduce("qa", sys.argv[1:], __doc__))
