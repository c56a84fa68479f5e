"""What an evaluation user expects of the everyday commands (issue 29, first items): folders made for
outputs, a misspelt option or command named with the nearest one, `run --help` in groups, `show`
lines that say which question is which and fit the terminal, counts in words, no search rate where
nothing searched, and a header that says when searches go to a store."""

import json
import re
import subprocess
import sys

from test_runs import _data, _oracle

from rawreact import read_run
from rawreact.cli.app import main
from rawreact.reports.show import listing
from rawreact.reports.summary import row_of, summarize, summary_line

RAWREACT = [sys.executable, "-m", "rawreact"]


def test_outputs_go_into_folders_that_do_not_exist_yet(rows, tmp_path, capsys):
    data, model = _data(rows, tmp_path, 2), _oracle(rows, tmp_path / "o.json")
    run = tmp_path / "runs" / "today" / "x.jsonl"
    assert main(["run", str(data), "--model", model, "--out", str(run), "-q"]) == 0
    assert len(read_run(run)[1]) == 2 and (run.parent / "x.jsonl.manifest.json").is_file()
    exported, page = tmp_path / "train" / "sft" / "e.jsonl", tmp_path / "pages" / "r.html"
    assert main(["export", str(run), "--out", str(exported)]) == 0 and exported.stat().st_size > 0
    assert main(["report", str(run), "--html", str(page)]) == 0 and page.stat().st_size > 0
    store = tmp_path / "stores" / "w.sqlite"
    assert main(["index", str(data), "--out", str(store)]) == 0 and store.is_file()
    capsys.readouterr()


def test_a_file_where_a_folder_should_be_is_one_line_and_nothing_is_made(tmp_path, capsys):
    (tmp_path / "taken").write_text("a file")
    (tmp_path / "s.json").write_text(json.dumps([" Done.\nAction 1: Finish[x]"]))
    args = ["run", "--question", "q?", "--model", f"scripted:{tmp_path / 's.json'}"]
    assert main([*args, "--out", str(tmp_path / "taken" / "deeper" / "r.jsonl")]) == 2
    assert "taken is a file, not a folder; choose another path" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "taken"]


def test_a_misspelt_option_command_or_choice_names_the_nearest_one():
    for args, said, usage in [
        (["run", "--limt", "5"], "rawreact run: error: unrecognized arguments: --limt; did you mean --limit?", "run"),
        (["rnu"], "did you mean run?", None),
        (["run", "--method", "cto"], "did you mean cot?", "run"),
        (["report", "x.jsonl", "--formt", "csv"], "did you mean --format?", "report"),
        (
            ["compare", "--out", "o", "--resume"],
            "unrecognized arguments: --resume; did you mean --resamples? (",
            "compare",
        ),
    ]:
        done = subprocess.run([*RAWREACT, *args], capture_output=True, text=True)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
        # Issue 43 item 10: one line, naming where the options are listed: no screen of usage before it.
        assert len(done.stderr.splitlines()) == 1, done.stderr
        prog = f"rawreact {usage}" if usage else "rawreact"
        assert done.stderr.startswith(f"{prog}: error: ") and f"({prog} --help lists the options)" in done.stderr


def test_run_help_groups_its_options_by_purpose():
    done = subprocess.run([*RAWREACT, "run", "--help"], capture_output=True, text=True)
    heads = [line for line in done.stdout.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert heads == [
        "options:",
        "the questions:",
        "the method and its prompts:",
        "the model and its sampling:",
        "the loop (grammar, passages, sentences per search):",
        "guardrails and limits:",
        "settings files and output:",
        "Reflexion (--method react-reflexion or cot-reflexion):",
        "LATS (--method lats):",
        "a Ray cluster (pip install 'rawreact[ray]'; docs: Runs across machines on Ray):",
    ]


def _records(rows, tmp_path, n=3):
    out = tmp_path / "r.jsonl"
    args = [str(_data(rows, tmp_path, n)), "--model", _oracle(rows, tmp_path / "o.json", wrong_every=2)]
    assert main(["run", *args, "--out", str(out), "-q"]) == 0
    return out, read_run(out)[1]


def test_show_lists_the_question_prediction_and_gold_and_fits_the_width(rows, tmp_path, capsys):
    _, records = _records(rows, tmp_path)
    capsys.readouterr()
    for width in (100, 160):
        lines = listing(records, width).splitlines()
        assert lines[0].split() == ["id", "EM", "F1", "ended", "steps", "question", "prediction", "gold"]
        assert all(len(line) <= width for line in lines)
        assert rows[0]["question"][:20] in lines[1] and rows[1]["answer"][:5] in lines[2] and "nobody" in lines[2]
    whole = listing(records)  # piped: nothing is cut
    assert rows[0]["question"] in whole and "…" not in whole


def test_counts_read_as_words_and_a_method_that_cannot_search_has_no_search_rate(rows, tmp_path, capsys):
    _, records = _records(rows, tmp_path, n=1)
    line = capsys.readouterr().out.splitlines()[1]
    steps = records[0]["steps"]
    assert f"after {steps} steps, {steps} calls, 0 invalid, 0 fallback, 0 repeats" in line
    one = {**records[0], "steps": 1, "model_calls": 1, "repeats": 1}
    from rawreact.reports.show import show

    assert "after 1 step, 1 call (0 fallback), 0 invalid actions, 1 repeat," in show(one)
    cot = {**records[0], "method": "cot", "branch": "cot", "searches": 0, "search_hits": 0, "trajectory": None}
    assert "search_hit_rate" not in summarize([cot]) and "no searches" in summary_line(summarize([cot]))
    assert row_of("cot", None, [cot])["search hits"] == "-"


def test_the_run_header_says_when_searches_go_to_a_store(rows, tmp_path, capsys):
    data = _data(rows, tmp_path, 2)
    store = tmp_path / "w.sqlite"
    assert main(["index", str(data), "--out", str(store)]) == 0
    script = tmp_path / "s.json"
    script.write_text(json.dumps([" Done.\nAction 1: Finish[x]"]))
    capsys.readouterr()
    assert main(["run", "--question", "q?", "--passages", str(store), "--model", f"scripted:{script}", "-q"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert f"searching the store {store} (" in header and "pages; the open setting)" in header


def _in_a_terminal(args: list[str], columns: int = 100) -> str:
    """What a command shows on a real terminal (a pseudo-terminal of `columns` columns), as written."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # the terminal's size decides
    process = subprocess.Popen([*RAWREACT, *args], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the command ended and closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert process.wait(timeout=120) == 0, shown.decode(errors="replace")
    return shown.decode("utf-8", errors="replace")


def _frames(shown: str) -> list[str]:
    """The progress bar's frames: `  50%|####      | 2/4 [00:03<00:03,  1.80s/q, a]`."""
    return [frame for frame in shown.replace("\n", "\r").split("\r") if re.search(r"\d+/\d+ \[\d", frame)]


def test_the_progress_clock_ticks_before_the_first_answer_and_a_resume_is_not_speed(rows, tmp_path):
    data = _data(rows, tmp_path, 4)
    model = _oracle(rows, tmp_path / "o.json", seconds_per_call=0.6)  # three calls: about 1.8 s a question
    out = str(tmp_path / "cmp")
    base = ["compare", str(data), "--base", f"model={model}", "--variant", "a=", "--variant", "b=k=1", "--out", out]
    first = _frames(_in_a_terminal([*base, "--limit", "1"]))
    waiting = [f for f in first if f.lstrip().startswith("0%") or " 0/2 " in f]
    assert any("00:01<" in f for f in waiting), first  # the clock moved while no question was done yet
    again = _frames(_in_a_terminal([*base, "--limit", "2"]))  # one question of each variant is kept
    last = again[-1]
    assert " 4/4 " in last
    seconds = float(last.split("s/q")[0].split()[-1]) if "s/q" in last else 1 / float(last.split("q/s")[0].split()[-1])
    assert seconds > 1.0, last  # counting the 2 kept questions as answered at once would halve it or worse


def test_text_tables_fit_the_terminal_and_markdown_and_csv_keep_every_column(rows, tmp_path, capsys):
    out, _ = _records(rows, tmp_path, n=3)
    other = tmp_path / "other.jsonl"
    assert (
        main(["run", str(tmp_path / "dev.json"), "--model", _oracle(rows, tmp_path / "p.json"), "--out", str(other)])
        == 0
    )
    capsys.readouterr()
    for width in (100, 160):
        shown = _in_a_terminal(["compare-runs", str(out), str(other), "--resamples", "200"], columns=width)
        lines = [line for line in shown.replace("\r", "").splitlines() if line and not line.startswith("3 questions")]
        assert max(map(len, lines)) <= width
        heads = [line.split() for line in lines if line.startswith("variant")]
        assert len(heads) >= 2 and all(head[0] == "variant" for head in heads)  # the name starts every table
        essentials = ["variant", "n", "EM", "ΔEM", "F1", "ΔF1", "finished"]  # first, as far as they fit
        first = min(len(heads[0]), len(essentials))
        assert heads[0][:first] == essentials[:first] and (width == 100 or first == len(essentials))
    assert main(["compare-runs", str(out), str(other), "--format", "markdown", "--resamples", "200"]) == 0
    markdown = capsys.readouterr().out.splitlines()
    assert len(markdown) == 4 and "| s/q |" in markdown[0] and "| ΔF1 |" in markdown[0]
    assert main(["report", str(out), "--columns", "EM,F1,s/q"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["run", "EM", "F1", "s/q"]
    assert main(["report", str(out), "--columns", "all"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2  # one table, however wide
    assert main(["report", str(out), "--columns", "EN"]) == 2
    assert "--columns: no column 'EN'; the columns are method, " in capsys.readouterr().err


def test_throughput_counts_the_wall_time_the_questions_covered_once(rows, tmp_path, capsys):
    _, records = _records(rows, tmp_path, n=2)
    assert all(
        r["started"] <= r["finished"] and abs(r["finished"] - r["started"] - r["seconds"]) < 0.05 for r in records
    )
    base = records[0]
    spans = [(0.0, 10.0), (5.0, 15.0), (100.0, 110.0)]  # two overlap (workers), then a gap (a resume)
    timed = [{**base, "id": str(i), "started": s, "finished": f} for i, (s, f) in enumerate(spans)]
    summary = summarize(timed)
    assert summary["wall_seconds"] == 25.0 and summary["per_minute"] == 3 * 60 / 25
    assert "(7.2 questions per minute of wall time)" in summary_line(summary)
    assert row_of("t", None, timed)["q/min"] == "7.2"
    untimed = [timed[0], {k: v for k, v in timed[1].items() if k not in ("started", "finished")}]
    assert "per_minute" not in summarize(untimed) and row_of("u", None, untimed)["q/min"] == "-"
