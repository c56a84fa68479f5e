"""Text games as a task: a folder of TextWorld games made by recipe, and read back as questions.

`make_games` runs TextWorld's own `tw-make` (its wheel ships the Inform 7 compiler, so games are
made offline and seeded) once per recipe and seed, into a folder with `games.json`, the manifest of
what was made: each game's id, file, recipe, seed, SHA-256, objective and the length of its
walkthrough. `read_games` reads such a folder as a collection whose questions are games (task
"game"): the question is the game's objective, and the environment is the game (`GameEnv`).

Recipes: `coin:L` (TextWorld's coin collector at level L), `treasure:L` (treasure hunter) and
`cooking:L` (a cooking game with L ingredients to find; from level 2 on, across six rooms, and from
level 3 on, with containers to open).

One room: the folder's manifest is written by `make_games` and read by `read_games`, and the two must agree
field for field (ids, files, hashes, the walkthrough); apart, a change to one would have to be found in the other.
"""

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rawreact.core.errors import DataError
from rawreact.core.tasks import GAME
from rawreact.core.text import whole_number
from rawreact.environments.game import ALFWORLD_KINDS, NEAREST_KIND, alfworld_kind, described
from rawreact.environments.scienceworld import is_episode
from rawreact.tasks.collection import Collection, Question

MANIFEST = "games.json"
KINDS = {"coin": "tw-coin_collector", "treasure": "tw-treasure_hunter", "cooking": "tw-cooking"}
LEVELS = {"coin": 300, "treasure": 30, "cooking": 5}  # the highest level each recipe takes


@dataclass(frozen=True)
class Recipe:
    """A kind of game and its level, as `coin:2`."""

    kind: str
    level: int

    @classmethod
    def parse(cls, text: str) -> "Recipe":
        """`KIND:LEVEL` -> Recipe; a bad one is a DataError naming the kinds and levels."""
        kind, _, level = text.strip().partition(":")
        number = whole_number(level) if level else 1
        if kind not in KINDS or number is None or not 1 <= number <= LEVELS[kind]:
            kinds = ", ".join(f"{k}:1..{n}" for k, n in LEVELS.items())
            raise DataError(f"recipe {text!r}: give KIND:LEVEL, one of {kinds}")
        return cls(kind, number)

    def arguments(self) -> list[str]:
        """tw-make's arguments for this recipe."""
        if self.kind != "cooking":
            return [KINDS[self.kind], "--level", str(self.level)]
        go = "1" if self.level == 1 else "6"
        opened = ["--open"] if self.level >= 3 else []
        return [KINDS[self.kind], "--recipe", str(self.level), "--take", str(self.level), "--go", go, *opened]

    def __str__(self) -> str:
        return f"{self.kind}:{self.level}"


def tw_make() -> str:
    """The `tw-make` command of the textworld that is installed, or a DataError saying how to get it."""
    beside = Path(sys.executable).with_name("tw-make")
    found = str(beside) if beside.is_file() else shutil.which("tw-make")
    if found is None:
        raise DataError("making games needs textworld's tw-make: pip install 'rawreact[games]' (or textworld)")
    return found


def make_games(
    folder: str | Path, recipes: list[str], seeds: list[int], on_game=None, jobs: int | None = None
) -> list[dict]:
    """Make one game per recipe and seed into `folder`, and write its manifest; the games made, in order.

    A game the folder already holds (same id, same file digest in the manifest) is kept, not made again.
    `jobs` games are compiled at once (default: one a core). `on_game(entry)` is called as each game is
    ready, in order, and the manifest is written after each, so an interrupted batch keeps what it made.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    parsed = [Recipe.parse(r) for r in recipes]
    old = {g["id"]: g for g in _entries(folder, _manifest(folder))} if (folder / MANIFEST).exists() else {}
    command, planned = tw_make(), []
    for recipe in parsed:
        for seed in seeds:
            game_id = f"{recipe.kind}{recipe.level}-s{seed}"
            path = folder / f"{game_id}.z8"
            kept = old.get(game_id)
            fresh = kept is not None and path.is_file() and _sha256(path) == kept["sha256"]
            planned.append((game_id, recipe, seed, path, kept if fresh else None))

    makers = _Makers()

    def made(plan: tuple) -> dict:
        game_id, recipe, seed, path, kept = plan
        if kept is not None:
            return kept
        makers.make(command, recipe, seed, path)
        return _entry(game_id, recipe, seed, path)

    games: list[dict] = []
    pool = ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1))  # tw-make is its own process
    try:
        for entry in pool.map(made, planned):
            games.append(entry)
            if on_game is not None:
                on_game(entry)
            _write_manifest(folder, games)
    except BaseException:  # Ctrl-C, SIGTERM (as KeyboardInterrupt) or a failed game: no tw-make goes on writing
        makers.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    return games


class _Makers:
    """The tw-make processes under way, each in a process group of its own (tw-make starts the Inform 7
    compiler), so that a stopped batch ends them all and removes what they half wrote."""

    def __init__(self) -> None:
        self.running: dict[subprocess.Popen, Path] = {}
        self.stopped = threading.Event()
        self._lock = threading.Lock()

    def make(self, command: str, recipe: Recipe, seed: int, path: Path) -> None:
        args = [command, *recipe.arguments(), "--seed", str(seed), "--output", str(path), "--silent", "-f"]
        with self._lock:
            if self.stopped.is_set():
                raise DataError("stopped")
            process = subprocess.Popen(
                args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
            )
            self.running[process] = path
        try:
            out, err = process.communicate()
        finally:
            with self._lock:
                self.running.pop(process, None)
        if process.returncode != 0 or not path.is_file():
            tail = (err or out).strip().splitlines()[-3:]
            raise DataError(f"tw-make could not make {recipe} with seed {seed}: {' / '.join(tail) or 'no output'}")

    def stop(self) -> None:
        """End every tw-make under way, with its children, and remove the files they were writing."""
        with self._lock:
            self.stopped.set()
            running = dict(self.running)
        for process, path in running.items():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            for half in (path, path.with_suffix(".json"), path.with_suffix(".ni")):
                half.unlink(missing_ok=True)


def _entry(game_id: str, recipe: Recipe, seed: int, path: Path) -> dict:
    """A game's manifest entry: what it is, and what the game file says of itself."""
    info = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    objective = " ".join(str(info.get("objective", "")).split())
    walkthrough = info.get("metadata", {}).get("walkthrough") or info.get("walkthrough") or []
    return {
        "id": game_id,
        "file": path.name,
        "recipe": str(recipe),
        "seed": seed,
        "sha256": _sha256(path),
        "objective": objective,
        "walkthrough_steps": len(walkthrough),
    }


def _write_manifest(folder: Path, games: list[dict]) -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        tw = version("textworld")
    except PackageNotFoundError:
        tw = None
    data = {"made_by": "rawreact games", "textworld": tw, "games": games}
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(folder / MANIFEST)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise DataError(f"{path}: cannot read the games manifest: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise DataError(f"{path} line {error.lineno}: not valid JSON: {error.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("games"), list):
        raise DataError(
            f"{path}: not a games manifest (an object with a list of games); make one with `rawreact games`"
        )
    return data


GAME_FILES = (".z8", ".ulx")  # what TextWorld compiles a game to (Inform 7's Z-machine and Glulx)


def is_games(path: str | Path) -> bool:
    """Whether `path` is games: a folder with games.json (or games.json itself), a game file, or a folder of them."""
    path = Path(path)
    if path.is_dir():
        return (path / MANIFEST).is_file() or any(p.suffix in GAME_FILES for p in path.iterdir())
    return path.name == MANIFEST or path.suffix in GAME_FILES


# The largest story file each Z-machine version can hold (the standard's 1.1, section 1.1.4), and Glulx's magic.
_Z_MOST = {1: 128 << 10, 2: 128 << 10, 3: 128 << 10, 4: 256 << 10, 5: 256 << 10, 6: 512 << 10, 7: 512 << 10,
           8: 512 << 10}  # fmt: skip
_GLULX = b"Glul"


def check_story(file: Path) -> None:
    """Refuse, when the folder is read, a game file the interpreter cannot run (its header is not a Z-machine's
    or Glulx's, or it is larger than its version allows), and a malformed TextWorld `.json` beside it: the
    interpreter would end the process at the game's turn with its own `Fatal error`."""
    try:
        with file.open("rb") as handle:
            head = handle.read(64)
        size = file.stat().st_size
    except OSError as error:
        raise DataError(f"{file}: cannot read the game: {error.strerror or error}") from None
    if file.suffix == ".ulx":
        if head[:4] != _GLULX:
            raise DataError(f"{file}: not a Glulx story file (it does not begin with 'Glul'); make it again")
    elif len(head) < 64 or head[0] not in _Z_MOST:
        raise DataError(
            f"{file}: not a Z-machine story file (its header names no version 1 to 8); make it again, or remove it"
        )
    elif size > _Z_MOST[head[0]]:
        raise DataError(
            f"{file}: {size:,} bytes, more than a version-{head[0]} Z-machine story holds ({_Z_MOST[head[0]]:,}); "
            "not a story file: make it again, or remove it"
        )
    info = file.with_suffix(".json")
    if info.exists():
        try:
            made = json.loads(info.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise DataError(
                f"{info}: not UTF-8 text, so not TextWorld's game description; make the game again"
            ) from None
        except json.JSONDecodeError as error:
            raise DataError(f"{info} line {error.lineno}: not valid JSON: {error.msg}; make the game again") from None
        except OSError as error:
            raise DataError(f"{info}: cannot read it: {error.strerror or error}") from None
        if not isinstance(made, dict):
            raise DataError(f"{info}: not TextWorld's game description (a JSON object); make the game again")


def read_game_files(path: str | Path) -> Collection:
    """Game files as a collection, made by TextWorld's `tw-make` or anyone else, without a games.json: a `.z8` or
    `.ulx` file, or a folder of them (in the order of their names). Each game's id is its file's name without
    the ending, its task TextWorld's objective (from the `.json` beside it, where there is one; else its id),
    and its SHA-256 is recorded, so a resume refuses a game changed since."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.suffix in GAME_FILES) if path.is_dir() else [path]
    folder = path if path.is_dir() else path.parent
    seen: dict[str, Path] = {}
    questions, digest = [], hashlib.sha256()
    for file in files:
        if not file.is_file():
            raise DataError(f"{file}: no such game file")
        if file.stem in seen:
            raise DataError(f"{file} and {seen[file.stem]} would both be the game {file.stem!r}; keep one of them")
        seen[file.stem] = file
        check_story(file)
        sha256 = _sha256(file)
        digest.update(f"{file.stem}\0{sha256}\0".encode())
        questions.append(Question(file.stem, _objective(file) or file.stem, "", task=GAME.name, game=str(file)))
    return Collection(folder.name, {}, tuple(questions), GAME.layout, str(path), digest.hexdigest())


def is_game_row(row: object) -> bool:
    """Whether a question file's row is a game an `--env` environment plays (`id` and `game`, no question)."""
    return isinstance(row, dict) and "game" in row and "question" not in row


def from_rows(path: Path, digest: str, rows: list[tuple[int, object]], unit: str = "row") -> Collection:
    """Games an `--env` environment plays (ALFWorld's, say), one a row: its `id`, its `game` (what the factory is
    given to find it, such as ALFWorld's game file) and its `kind` (an ALFWorld kind: put, clean, heat, cool,
    examine, puttwo, or its long name; else read from the game's folder, as alfworld.ipynb reads it; else put).
    The kind chooses the exemplars of a prompt keyed by kind; the record and the lines name the game by its id."""
    questions, seen = [], set()
    for number, row in rows:
        where = f"{path} {unit} {number}"
        if not is_game_row(row):
            raise DataError(f"{where}: every row of a games file is an object with 'id' and 'game', as row 1 is")
        for name in ("id", "game"):
            if not isinstance(row.get(name), str) or not row[name].strip():
                raise DataError(f"{where}: {name!r} must be text, not empty (a game's row: its 'id' and 'game')")
        if row["id"] in seen:
            raise DataError(f"{where} repeats the id {row['id']!r}; give each game its own id")
        seen.add(row["id"])
        said = row.get("kind")
        if said is not None and not isinstance(said, str):
            raise DataError(f"{where}: 'kind' must be text, such as heat or pick_heat_then_place_in_recep")
        kind = alfworld_kind(said, row["game"])
        if said and kind is None:
            kinds = ", ".join(ALFWORLD_KINDS.values())
            raise DataError(f"{where}: 'kind' {said!r} is no ALFWorld kind ({kinds}, or their long names)")
        task = row.get("task") if isinstance(row.get("task"), str) else row["id"]
        questions.append(Question(row["id"], task, "", kind=kind or NEAREST_KIND, task=GAME.name, game=row["game"],
                                  row=row))  # fmt: skip
    if not questions:
        raise DataError(f"{path} lists no games")
    return Collection(path.stem, {}, tuple(questions), GAME.layout, str(path), digest)


def undescribed(collection: Collection) -> list[str]:
    """The game files of a collection without TextWorld's `.json` beside them: they do not say which commands
    they admit, so `--grammar commands` cannot apply to them."""
    return [q.game for q in collection.questions if q.game and not is_episode(q.game) and not described(q.game)]


def _objective(game: Path) -> str:
    """The objective TextWorld's `.json` beside a game gives, on one line, or "" (no such file, or none in it)."""
    try:
        info = json.loads(game.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    return " ".join(str(info.get("objective", "")).split()) if isinstance(info, dict) else ""


# Each field of a games manifest's entry, with the type it must have and whether it may be missing.
_ENTRY = {"id": (str, True), "file": (str, True), "sha256": (str, True), "objective": (str, False)}
_ENTRY |= {"recipe": (str, False), "seed": (int, False), "walkthrough_steps": (int, False)}


def _entries(folder: Path, data: dict) -> list[dict]:
    """The games of a manifest, each checked: its fields' types, an id given once, and a file that is a plain
    name inside the folder (a path, or a link, could make a run open any file its digest vouches for)."""
    where, seen = folder / MANIFEST, set()
    for n, game in enumerate(data["games"], 1):
        if not isinstance(game, dict):
            raise DataError(f"{where}: game {n} is not an object with id, file and sha256; was the file edited?")
        for key, (kind, needed) in _ENTRY.items():
            if key not in game and needed:
                raise DataError(f"{where}: game {n} has no {key!r}; each game needs id, file and sha256")
            value = game.get(key)
            if key in game and not (isinstance(value, kind) and not isinstance(value, bool)):
                said = "a string" if kind is str else "a whole number"
                raise DataError(
                    f"{where}: game {n} has {key!r} = {json.dumps(value)[:40]}, which is not {said}; was the file "
                    "edited? make the games again with `rawreact games`"
                )
        if not game["id"].strip() or any(c in game["id"] for c in "\r\n\t\0"):
            raise DataError(f"{where}: game {n} has the id {game['id']!r}: an id is one line of text, not empty")
        if game["id"] in seen:
            raise DataError(f"{where}: game {n} repeats the id {game['id']!r}; give each game its own id")
        seen.add(game["id"])
        name = game["file"]
        if name in ("", ".", "..") or Path(name).name != name or "\\" in name or (folder / name).is_symlink():
            raise DataError(
                f"{where}: game {n}'s file {name!r} is not a plain file name in {folder}; a game's file lies in "
                "its games folder, not behind a path or a link"
            )
    return data["games"]


def read_games(path: str | Path) -> Collection:
    """A games folder (or its games.json) as a collection: one question per game, in the manifest's order.

    Every game file is checked against its digest, and each has TextWorld's `.json` beside it (the
    objective and the commands the game admits come from it), so a run names exactly the games it plays
    and fails before any model loads, not at a game's turn.
    """
    path = Path(path)
    if path.suffix in GAME_FILES or (path.is_dir() and not (path / MANIFEST).is_file()):
        return read_game_files(path)
    folder = path if path.is_dir() else path.parent
    data = _manifest(folder)
    questions, digest = [], hashlib.sha256()
    for game in _entries(folder, data):
        file = folder / game["file"]
        if not file.is_file():
            raise DataError(f"{file}: the game is missing; make it again with `rawreact games {folder}`")
        if _sha256(file) != game["sha256"]:
            raise DataError(f"{file}: the game file changed since it was made (its SHA-256 differs); make it again")
        if not described(file):
            raise DataError(
                f"{file.with_suffix('.json')}: missing; TextWorld reads a game's objective and admissible commands "
                f"from the .json tw-make writes beside it: copy it back, or make the game again with `rawreact "
                f"games {folder}`"
            )
        check_story(file)
        digest.update(f"{game['id']}\0{game['sha256']}\0".encode())
        objective = game.get("objective") or game["id"]
        questions.append(Question(game["id"], objective, "", kind=game.get("recipe", ""), task=GAME.name,
                                  game=str(file)))  # fmt: skip
    if not questions:
        raise DataError(f"{folder / MANIFEST} lists no games; make some with `rawreact games {folder}`")
    return Collection(folder.name, {}, tuple(questions), GAME.layout, str(folder), digest.hexdigest())
