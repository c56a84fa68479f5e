"""Reading question files, with the layout detected from the file itself:

- the project's own `envs/` layout: one object with shared `passages` and `questions`
  (see envs/README.md);
- the official HotpotQA JSON: a list of rows with `context` as `[title, [sentences]]` pairs;
- Hugging Face `hotpot_qa` rows, as a JSON list or JSONL, with `context` as parallel lists;
- FEVER's claims (`fever.py`);
- a folder of text games with its games.json (`games.py`).

`load_collection` tells the layout from the file itself; `open_passages` opens a store or pools a
question file's paragraphs, for `--passages`.
"""

import errno
import hashlib
import json
import re
from pathlib import Path

from rawreact.core.errors import DataError
from rawreact.core.resources import resource
from rawreact.tasks import fever, games, hotpotqa, humaneval, named, scienceworld
from rawreact.tasks.collection import Collection, Passages, Question, check_unique_ids

DEMO = "demo.json"


def open_passages(path: str | Path) -> Passages:
    """A passage store (`rawreact index`), or a collection or HotpotQA file's passages (pooled)."""
    from rawreact.environments.store import PassageStore, is_store

    if named.is_name(path):
        path = named.path_of(str(path))
    if not Path(path).is_file():
        raise DataError(
            f"{path}: no such file; --passages takes a store built by `rawreact index`, a collection (envs/ layout) "
            "or a HotpotQA file"
        )
    if is_store(path):
        store = PassageStore(path)
        return Passages(str(path), store, store.sha256, "store")
    if Path(path).suffix.lower() in (".sqlite", ".sqlite3", ".db"):
        raise DataError(
            f"{path}: not an SQLite file, so not a passage store; build one with "
            f"`rawreact index SOURCE... --out {path}`"
        )
    collection = load_collection(path).pooled()
    return Passages(str(path), collection.passages, collection.sha256, "collection")


def load_collection(path: str | Path | None = None, questions_only: bool = False) -> Collection:
    """Read a question file in any known layout, or games (`games.read_games`); the demo collection shipped in
    `envs/` by default. Where the run brings the passages or the environment (`questions_only`: `--passages`,
    `--env`), a HotpotQA-style row needs its question alone (`hotpotqa.from_rows`)."""
    if path is not None and scienceworld.is_scienceworld(path):  # episodes of the simulator, by name
        return scienceworld.read_scienceworld(str(path))
    if path is not None and humaneval.is_humaneval(path):  # HumanEval's problems, from its installed package
        return humaneval.read_humaneval(str(path))
    if path is not None and named.is_name(path):  # a benchmark by name: its file, downloaded once and checked
        path = named.path_of(str(path))
    path = Path(path) if path else resource("envs", DEMO)
    if games.is_games(path):
        return games.read_games(path)
    if path.suffix == ".gz":  # programs' problems, gzipped as HumanEval ships them
        return humaneval.read_file(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        hint = ""
        if error.errno == errno.ENOENT:
            meant = named.nearest(str(path)) if len(path.parts) == 1 else None
            hint = f"; did you mean the benchmark {meant}?" if meant else ";"
            hint += " `rawreact data` lists the benchmarks rawreact knows by name"
        raise DataError(f"{path}: cannot read the question file: {error.strerror}{hint}") from None
    try:
        text = raw.decode("utf-8-sig")  # a byte order mark, as some editors write, is not part of the data
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    digest = hashlib.sha256(raw).hexdigest()
    collection = _parse(path, text, digest, questions_only)
    if _SURROGATE_ESCAPE.search(text):
        _check_encodable(collection)
    return collection


# A JSON escape of a UTF-16 surrogate: the only way a lone surrogate gets into a decoded string.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_encodable(collection: Collection) -> None:
    """Refuse text that no UTF-8 file, terminal or model can take (a lone surrogate such as "\\ud83d")."""

    def bad(text: str) -> bool:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    where = f"{collection.source}"
    for title, passage in collection.passages.items():
        if bad(title) or any(bad(s) for s in ([passage] if isinstance(passage, str) else passage)):
            raise DataError(f"{where}: passage {title!r} holds a lone surrogate escape (\\ud800-\\udfff); fix the text")
    for question in collection.questions:
        texts = [question.id, question.question, question.answer, *question.supporting]
        for title, sentences in (question.passages or {}).items():
            texts += [title, *sentences]
        if any(bad(t) for t in texts):
            raise DataError(
                f"{where}: question {question.id!r} holds a lone surrogate escape (\\ud800-\\udfff), which no "
                "UTF-8 text can carry; fix or remove that question"
            )


def _parse(path: Path, text: str, digest: str, questions_only: bool = False) -> Collection:
    def rows_of(rows: list[tuple[int, object]], unit: str) -> Collection:
        if rows and fever.is_claim_row(rows[0][1]):
            return fever.from_rows(path, digest, rows, unit)
        if rows and humaneval.is_problem_row(rows[0][1]):  # problems of programs (HumanEval's layout)
            return humaneval.from_rows(path, digest, rows, unit)
        if rows and questions_only and games.is_game_row(rows[0][1]):  # games an --env environment plays
            return games.from_rows(path, digest, rows, unit)
        return hotpotqa.from_rows(path, digest, rows, unit, questions_only)

    start = text.lstrip()[:1]
    if not start:
        raise DataError(f"{path} is empty; give a HotpotQA file (JSON or JSONL) or a collection (envs/README.md)")
    if start == "{":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            if error.msg != "Extra data":  # one object per line is JSONL; anything else is broken JSON
                raise _invalid(path, error) from None
            return rows_of(hotpotqa.jsonl_rows(path, text), "line")
        if isinstance(data, dict) and "passages" in data:
            return _envs_layout(path, digest, data)
        row_keys = ("context", "claim", "question", "game", "id", "answer") if questions_only else ("context", "claim")
        row_keys += ("task_id", "entry_point")  # a problem of a program
        if isinstance(data, dict) and any(key in data for key in row_keys):  # a JSONL file of one row
            return rows_of([(1, data)], "line")
        raise _unknown(path)
    if start == "[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise _invalid(path, error) from None
        return rows_of(list(enumerate(data, 1)), "row")
    raise _unknown(path)


def _invalid(path: Path, error: json.JSONDecodeError) -> DataError:
    return DataError(f"{path} line {error.lineno} column {error.colno}: not valid JSON: {error.msg}")


def _unknown(path: Path) -> DataError:
    return DataError(
        f"{path}: unknown layout; rawreact reads the official HotpotQA JSON (a list of rows with 'context' "
        "pairs), Hugging Face hotpot_qa rows (JSON list or JSONL), FEVER claims (JSONL) and collections as in "
        "envs/README.md"
    )


def _envs_layout(path: Path, digest: str, data: dict) -> Collection:
    passages = data["passages"]
    if not isinstance(passages, dict):
        raise DataError(f"{path}: 'passages' must be an object (title -> text); see envs/README.md")
    for title, passage in passages.items():
        sentences = passage if isinstance(passage, list) else [passage]
        if not all(isinstance(s, str) for s in sentences):
            raise DataError(f"{path}: passage {title!r} must be a string or a list of sentence strings")
    rows = data.get("questions", [])
    if not isinstance(rows, list):
        raise DataError(f"{path}: 'questions' must be a list")
    questions = tuple(_question(path, i, row, set(passages)) for i, row in enumerate(rows))
    check_unique_ids(path, questions)
    return Collection(str(data.get("name", path.stem)), passages, questions, "envs", str(path), digest)


def _question(path: Path, index: int, row: object, titles: set[str]) -> Question:
    where = f"{path}: questions[{index}]"
    if not isinstance(row, dict):
        raise DataError(f"{where} must be an object with 'question' and 'answer'")
    for name in ("question", "answer"):
        if not isinstance(row.get(name), str):
            raise DataError(f"{where} needs a string {name!r}")
    supporting = row.get("supporting", [])
    if not isinstance(supporting, list) or not all(isinstance(t, str) for t in supporting):
        raise DataError(f"{where}: 'supporting' must be a list of passage titles")
    unknown = [t for t in supporting if t not in titles]
    if unknown:
        raise DataError(f"{where}: supporting titles {unknown} are not among the passages")
    return Question(str(row.get("id", f"q{index + 1}")), row["question"], row["answer"], tuple(supporting))
