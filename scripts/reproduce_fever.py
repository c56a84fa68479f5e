"""Run the ReAct paper's FEVER protocol on your model and claims, then print its summary.

    python scripts/reproduce_fever.py paper_dev.jsonl --reference ~/ReAct --passages fever-wiki.sqlite \\
        --model my-model.gguf --out fever-500.jsonl [any other `rawreact run` option]

`--reference DIR` (your checkout of the reference repository) takes the paper's setup from it: its
`prompts/fever.json` (a key per method, each carrying its own instruction, with nothing in front, as
FEVER.ipynb sends it), the reference loop and environment, 5 sentences per search, 7 steps (5 for
`--method react-cot-sc`, as the paper says), the 500 claims FEVER.ipynb draws (indices shuffled by
`random.Random(233)` over `range(7405)` of `paper_dev.jsonl`'s 9,999) and the reference's scoring
(the normalised answer against the normalised label). The methods that search need a store of
FEVER's wiki-pages (`rawreact index wiki-pages/ --out fever-wiki.sqlite`). Options you give override
the protocol's. The run resumes if it was interrupted: run the same command again.
"""

import sys

from rawreact.cli.reproduce import reproduce

if __name__ == "__main__":
    sys.exit(reproduce("fever", sys.argv[1:], __doc__))
