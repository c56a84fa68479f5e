"""Passage collections with questions: the `envs/` layout (see envs/README.md)."""

import json
from dataclasses import dataclass
from pathlib import Path

from rawreact.env import PassageEnv
from rawreact.errors import DataError
from rawreact.resources import resource

DEMO = "demo.json"


@dataclass(frozen=True)
class Question:
    """A question with its gold answer and the titles of the passages that support it."""

    id: str
    question: str
    answer: str
    supporting: tuple[str, ...] = ()


@dataclass(frozen=True)
class Collection:
    """Passages (title -> text or list of sentences) shared by a list of questions."""

    name: str
    passages: dict
    questions: tuple[Question, ...]

    def env(self, n_first: int = 2) -> PassageEnv:
        """A fresh environment over the passages."""
        return PassageEnv(self.passages, n_first=n_first)


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


def load_collection(path: str | Path | None = None) -> Collection:
    """Read a collection file; the demo collection shipped in `envs/` by default."""
    path = Path(path) if path else resource("envs", DEMO)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise DataError(f"{path}: cannot read the collection: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise DataError(f"{path} line {error.lineno} column {error.colno}: not valid JSON: {error.msg}") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    if not isinstance(data, dict) or not isinstance(data.get("passages"), dict):
        raise DataError(f"{path}: a collection is an object with 'passages' (title -> text); see envs/README.md")
    passages = data["passages"]
    for title, passage in passages.items():
        sentences = passage if isinstance(passage, list) else [passage]
        if not all(isinstance(s, str) for s in sentences):
            raise DataError(f"{path}: passage {title!r} must be a string or a list of sentence strings")
    rows = data.get("questions", [])
    if not isinstance(rows, list):
        raise DataError(f"{path}: 'questions' must be a list")
    questions = tuple(_question(path, i, row, set(passages)) for i, row in enumerate(rows))
    return Collection(str(data.get("name", path.stem)), passages, questions)
