"""A newcomer's fourth day (issue 93): figures that read right, code that reads as code, and no silent waits."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import kept  # noqa: E402  (a benchmark module, beside the scripts that use it)


def _ledger(tmp_path: Path) -> Path:
    """A ledger of questions scored by their answer (success null, as HotpotQA's) under two rows."""
    ledger = tmp_path / "hotpotqa.kept.jsonl"
    lines = [{"row": row, "id": f"q{n}", "success": None, "em": float(n < right), "f1": None, "model_calls": 2}
             for row, right in (("reflexion", 3), ("lats", 1)) for n in range(4)]  # fmt: skip
    ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return ledger


def test_a_score_the_items_do_not_have_is_never_counted_as_zero(tmp_path):
    """Item 1: `kept.py` defaulted to --score success and read HotpotQA's `success: null` as 0 (`reflexion 100
    0.000`)."""
    ledger = _ledger(tmp_path)
    shown = kept.table(ledger)  # the ledger's own score: em, since no item has a success
    assert "| lats | 4 | 0.250 [0.046, 0.699] | base |" in shown
    assert "| reflexion | 4 | 0.750 [0.301, 0.954] | +0.500" in shown
    asked = kept.table(ledger, metric="success")  # asked for one they lack: said, not zeros
    assert "0.000" not in asked and "| reflexion | 0 of 4 | - |" in asked
    assert "no success in the items of lats, reflexion" in asked


def test_a_base_the_ledger_does_not_hold_is_one_line_naming_its_rows(tmp_path):
    """Item 1: `--base react-tolerant` on a ledger without it gave a table of `-` without a word."""
    ledger = _ledger(tmp_path)
    done = subprocess.run([sys.executable, str(BENCHMARKS / "kept.py"), str(ledger), "--base", "react-tolerant"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.strip() == (
        f"{ledger}: no row 'react-tolerant' to pair against; its rows: lats, reflexion; give --base ROW"
    )


@pytest.mark.parametrize("page", ["benchmarks.md", "lats.md"])
def test_the_docs_ledger_commands_print_what_the_pages_say(page):
    """Item 1: docs/benchmarks.md's command named a row the ledger lacks, and docs/lats.md said 3,999 CPU-s a
    question beside a command that prints 4,639.7."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    ledger = BENCHMARKS / "results" / "hotpotqa-qwen.kept.jsonl"
    if page == "benchmarks.md":
        done = kept.table(ledger, "reflexion", "em")
        assert (
            "`python benchmarks/kept.py benchmarks/results/hotpotqa-qwen.kept.jsonl --base reflexion --score em" in text
        )
        assert "| reflexion | 100 | 0.370 [0.282, 0.468] | base |" in done
    else:
        done = kept.table(ledger, "reflexion", "em")
        cost = next(line for line in done.splitlines() if line.startswith("| lats |")).rsplit("|", 2)[1].strip()
        assert f"{float(cost):,.1f} CPU seconds a finished question as the command prints it" in text
