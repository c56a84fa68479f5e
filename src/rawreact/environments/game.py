"""`GameEnv`: a TextWorld text game, the shape of ALFWorld's household tasks.

An action is a command line (`open wooden door`), or `think: ...`, which the game never sees and
answers `OK.`, as the reference repository's `alfworld.ipynb` does. Each observation is what the game
said, on one line: its status bar, its prompt and the banner are gone. The episode ends when the game
is won or lost; `reward` is the share of the game's points scored, and `won` says whether it was won.
`admissible` lists the commands the game accepts now, which the commands grammar turns into the only
lines a model may write. textworld is an optional extra (`pip install 'rawreact[games]'`), imported
when a game starts.
"""

import re
import threading
import warnings
from pathlib import Path

from rawreact.core.actions import Action, Verbs, parse_command
from rawreact.core.errors import DataError
from rawreact.core.verbs import Verb

GAME_VERBS = Verbs(
    [
        Verb(
            "think",
            "think",
            arg="prefix",
            description="notes a thought: the game does not see it, and answers OK.",
            parameter="thought",
            tool=False,
        ),
        Verb("command", "", arg="command", description="is a command the game understands.", parameter="command"),
    ]
)
THOUGHT_SEEN = "OK."  # what a thought is answered, as in alfworld.ipynb
# TextWorld's interpreter (jericho's frotz) is not safe to drive from two threads at once: under --workers,
# games in flight take turns at it, one command at a time (a command costs milliseconds, a model call far more).
_INTERPRETER = threading.Lock()
# alfworld.ipynb's (and the Reflexion code's) prefixes of ALFWorld's six kinds of game, by the name of the game's
# folder, and the exemplar key each kind takes; a game of no such kind (TextWorld's) takes `put`, the nearest.
ALFWORLD_KINDS = {"pick_and_place": "put", "pick_clean_then_place": "clean", "pick_heat_then_place": "heat",
                  "pick_cool_then_place": "cool", "look_at_obj": "examine", "pick_two_obj": "puttwo"}  # fmt: skip
NEAREST_KIND = "put"
BANNER = "-= Welcome"  # how ALFWorld's first text begins (`-= Welcome to TextWorld, ALFRED! =-`)


def alfworld_kind(*said: str | None) -> str | None:
    """The exemplar key of the first of `said` that names an ALFWorld kind: a key itself (`heat`), a kind's name
    (`pick_heat_then_place_in_recep`), or a game's path with a folder so named, as the notebook reads
    `info['extra.gamefile']`; None when none does."""
    for text in said:
        if not text:
            continue
        if text in ALFWORLD_KINDS.values():
            return text
        for part in reversed(str(text).replace("\\", "/").split("/")):
            found = next((key for prefix, key in ALFWORLD_KINDS.items() if part.startswith(prefix)), None)
            if found:
                return found
    return None


def drop_banner(opening: str) -> str:
    """ALFWorld's first text without its banner, as the notebook drops it (`'\\n'.join(ob.split('\\n\\n')[1:])`);
    an opening that does not begin with the banner, as it is."""
    return "\n".join(opening.split("\n\n")[1:]) if opening.startswith(BANNER) else opening


ALFWORLD_TASK = "Your task is to: "  # how an ALFWorld game's opening states its task, after its room
_END = "*** The End ***"
_LOST = "*** You lost! ***"
_SCORE = re.compile(r"(\d+)/(\d+)\s*$")  # the status bar's score, at the end of every reply
_FINAL = re.compile(r"You scored (\d+) out of a possible (\d+)")
_WORDS = re.compile(r"[A-Za-z]{2}")  # a line of text, not of the banner's drawing
_STATUS = re.compile(r"\n>[^\n]*$")  # the game's prompt and status bar after it, which every reply ends with


def described(path: str | Path) -> bool:
    """Whether a game has TextWorld's `.json` beside it: its objective, score, ending and admissible commands."""
    return Path(path).with_suffix(".json").is_file()


def commands_unknown(path: str | Path) -> str:
    """Why `--grammar commands` cannot apply to a game without its `.json`, and what to do."""
    return (
        f"{path}: the game does not say which commands it admits (TextWorld's .json is not beside it), so "
        "--grammar commands cannot apply; drop it, or put the game's .json beside it"
    )


def clean(feedback: str) -> str:
    """A game's reply on one line: without its prompt and status bar, or what follows `*** The End ***`."""
    text = _STATUS.sub("", feedback)
    if _END in text:
        text = text[: text.index(_END)]
    return " ".join(text.split())


class GameEnv:
    """One TextWorld game: a `.z8` or `.ulx` file, made by `tw-make` or anyone else.

    With TextWorld's `.json` beside it, the game says its objective, its score, whether it was won or lost,
    and the commands it admits. Without one, the interpreter's text is all there is: the opening is its
    first text without the banner, the score is read from its status bar (`0/1`), the game is won when
    it ends (`*** The End ***`) with every point scored and lost when it says so, and no command list is
    known (so `--grammar commands` cannot apply: `described` is False)."""

    verbs = GAME_VERBS
    style = "commands"

    def __init__(self, path: str | Path, opening: str = "textworld") -> None:
        self.path = Path(path)
        self.layout = opening  # "textworld": its objective, then its room; "alfworld": the room, then the task
        if not self.path.is_file():
            raise DataError(f"{self.path}: no such game file; make games with `rawreact games`")
        self._game = None
        self.described = described(self.path)
        self.answer: str | None = None
        self.opening = ""
        self.admissible: list[str] | None = [] if self.described else None  # None: not known without the .json
        self.score, self.max_score, self.won, self.lost, self.moves = 0, 1, False, False, 0
        self.obs = ""

    def fresh(self) -> "GameEnv":
        """The same game, not yet started."""
        return GameEnv(self.path, self.layout)

    def laid_out(self, opening: str) -> "GameEnv":
        """The same game, not yet started, its opening laid out as `opening` says ("textworld" or "alfworld")."""
        return GameEnv(self.path, opening)

    def _start(self):
        try:
            import textworld
        except ImportError:
            raise DataError(
                "text games need textworld: pip install 'rawreact[games]' (or pip install textworld)"
            ) from None
        known = self.described  # without the .json, TextWorld knows none of these
        infos = textworld.EnvInfos(
            admissible_commands=known, score=known, max_score=known, won=known, lost=known, objective=known,
            description=known,
        )  # fmt: skip
        try:
            with warnings.catch_warnings():  # jericho's "not fully supported": TextWorld keeps the score itself
                warnings.simplefilter("ignore")
                return textworld.start(str(self.path), request_infos=infos)
        except Exception as error:  # noqa: BLE001 - textworld raises many kinds for a bad file
            raise DataError(f"{self.path}: textworld cannot start this game: {error}") from None

    def reset(self) -> None:
        """Start the game from its beginning: `opening` is its objective and the first room."""
        with _INTERPRETER:
            if self._game is not None:
                self._game.close()
            self._game = self._start()
            with warnings.catch_warnings():  # jericho's "not fully supported": TextWorld keeps the score itself
                warnings.simplefilter("ignore")
                state = self._game.reset()
        if self.described and self.layout == "alfworld":  # as ALFWorld opens, after the notebook drops its banner
            self.opening = f"{clean(state['description'])}\n{ALFWORLD_TASK}{' '.join(state['objective'].split())}"
        elif self.described:
            self.opening = f"{' '.join(state['objective'].split())}\n{clean(state['description'])}"
        else:  # the interpreter's first text, without the banner's drawing
            self.opening = clean("\n".join(line for line in state.feedback.splitlines() if _WORDS.search(line)))
        self._update(state)
        self.answer, self.obs = None, ""

    def _update(self, state) -> None:
        if not self.described:  # what the text says: the status bar's score, and how the game ended
            feedback = state.feedback or ""
            found = _FINAL.search(feedback) or _SCORE.search(feedback)  # the status bar can lag the last points
            if found:
                self.score, self.max_score = int(found.group(1)), int(found.group(2)) or 1
            self.won = _END in feedback and self.score >= self.max_score
            self.lost = _LOST in feedback or (_END in feedback and not self.won)
            return
        self.admissible = sorted(state["admissible_commands"] or [])
        self.score, self.max_score = state["score"] or 0, state["max_score"] or 1
        self.won, self.lost = bool(state["won"]), bool(state["lost"])

    @property
    def done(self) -> bool:
        """Whether the game is over: won or lost."""
        return self.won or self.lost

    @property
    def reward(self) -> float:
        """The share of the game's points scored so far, 0 to 1."""
        return self.score / self.max_score if self.max_score else 0.0

    def step(self, action: str | Action) -> tuple[str, bool]:
        """Carry out one command or thought; (observation, done). A game over answers as it ended."""
        parsed = parse_command(action, self.verbs) if isinstance(action, str) else action
        if self._game is None:
            self.reset()
        if self.done:
            return self.obs, True
        if parsed is None:
            self.obs = "Nothing happens."
            return self.obs, False
        if parsed.name == "think":
            return THOUGHT_SEEN, False
        with _INTERPRETER:
            state, _, _ = self._game.step(parsed.arg)
        self.moves += 1
        self._update(state)
        self.obs = clean(state.feedback) or "Nothing happens."
        return self.obs, self.done

    def close(self) -> None:
        """Stop the game's interpreter."""
        with _INTERPRETER:
            if self._game is not None:
                self._game.close()
                self._game = None
