"""ScienceWorld as data: `--data scienceworld:SPLIT:TASKS:N`, one question per episode (a task's variation).

The spelling, each part optional from the right:

- SPLIT: `train`, `dev` or `test` (ScienceWorld's own division of each task's variations), or SwiftSage's
  subsets, as its `load_variation` cuts them: `test_mini` (the first 3 test variations), `test_mini_2` (the
  4th to the 10th), `test_mini_mini` (the first) and `dev` cut to 3 is its `dev`, spelled here `dev_mini`.
  Default `test_mini`, SwiftSage's.
- TASKS: `all` (default), or task names and SwiftSage's numbers (0 to 29, the order ScienceWorld lists the
  tasks in), and ranges of numbers, joined by commas: `boil,4,10-12`.
- N: at most N variations of each task, the first of the split (default: all the split has).
- `simplify=...` (ScienceWorld's simplifications joined by commas, or `none`; default `easy`, SwiftSage's)
  and `limit=...` (the simulator's step limit; default 100), anywhere after the first part.

Each question's id is `TASK-vVARIATION`, its kind the task's name (so reports break scores down by task),
and its game the episode (`environments.scienceworld.Episode`). The collection's SHA-256 is that of the
episodes it lists and of the simulator's jar, so a resume refuses another simulator.
"""

import difflib
import hashlib

from rawreact.core.errors import DataError
from rawreact.core.folders import is_named_data
from rawreact.core.tasks import SCIENCEWORLD
from rawreact.core.text import whole_number
from rawreact.environments.scienceworld import ENV_STEPS, SIMPLIFY, SIMULATOR, Episode, jar_sha256
from rawreact.tasks.collection import Collection, Question

PREFIX = "scienceworld"
# SwiftSage's sets (eval_utils.load_variation): a split, and the slice of its variations it takes.
SETS = {
    "train": ("train", None),
    "dev": ("dev", None),
    "test": ("test", None),
    "dev_mini": ("dev", slice(0, 3)),
    "test_mini": ("test", slice(0, 3)),
    "test_mini_2": ("test", slice(3, 10)),
    "test_mini_mini": ("test", slice(0, 1)),
}
SPELLING = "scienceworld[:SPLIT[:TASKS[:N]]][:simplify=S][:limit=L]"
# ScienceWorld's simplifications (its `get_possible_simplifications`, and `easy`: all of them), known before the
# simulator starts, so a misspelt one is refused at once.
SIMPLIFICATIONS = ("easy", "teleportAction", "selfWateringFlowerPots", "openContainers", "openDoors",
                   "noElectricalAction")  # fmt: skip
MOST = 10_000  # the most variations of a task, and the largest step limit (a Java int would overflow far above)


def is_scienceworld(data: str) -> bool:
    """Whether `--data` names ScienceWorld episodes rather than a file."""
    return is_named_data(data) and str(data).split(":", 1)[0] == PREFIX


def _fail(data: str, why: str) -> DataError:
    return DataError(f"--data {data}: {why}; write {SPELLING}, e.g. scienceworld:test_mini:boil,4:1")


def parse(data: str) -> tuple[str, str, int | None, str, int]:
    """The parts of a ScienceWorld spelling: (set, tasks, most variations, simplifications, step limit)."""
    parts = str(data).split(":")[1:]
    named = {}
    for part in [p for p in parts if "=" in p]:
        key, _, value = part.partition("=")
        if key not in ("simplify", "limit") or key in named:
            raise _fail(data, f"{part!r} is not simplify=... or limit=..., given once")
        named[key] = value
    plain = [p for p in parts if "=" not in p]
    if len(plain) > 3:
        raise _fail(data, "too many parts")
    chosen, tasks, most = (plain + ["test_mini", "all", ""][len(plain) :])[:3]
    if chosen not in SETS:
        raise _fail(data, f"no set {chosen!r}; the sets are {', '.join(SETS)}")
    count = whole_number(most) if most else None
    if most and (count is None or not 1 <= count <= MOST):
        raise _fail(data, f"N is a whole number of variations, 1 to {MOST:,}, not {most!r}")
    limit = whole_number(named.get("limit", str(ENV_STEPS)))
    if limit is None or not 1 <= limit <= MOST:
        raise _fail(
            data,
            f"limit={named['limit']}: the simulator's step limit is a whole number, 1 to {MOST:,} (SwiftSage's: 100)",
        )
    simplify = named.get("simplify", SIMPLIFY)
    unknown = [s for s in simplify.split(",") if s and s not in SIMPLIFICATIONS] if simplify != "none" else []
    if unknown:
        known = ", ".join(SIMPLIFICATIONS)
        raise _fail(
            data, f"simplify={simplify}: no simplification {unknown[0]!r}; they are {known} (joined by commas), or none"
        )
    return chosen, tasks or "all", count, "" if simplify == "none" else simplify, limit


def task_list(data: str, tasks: str, names: list[str]) -> list[str]:
    """The task names `tasks` chooses, in the order given (`all`: ScienceWorld's order)."""
    if tasks == "all":
        return list(names)
    chosen = []
    for part in tasks.split(","):
        low, dash, high = part.partition("-")
        if part in names:
            found = [part]
        elif low.isdigit() and (not dash or high.isdigit()):
            first, last = int(low), int(high) if dash else int(low)
            if first > last:
                raise _fail(data, f"task {part!r}: a range runs from the lower number to the higher, as {last}-{first}")
            if not 0 <= first <= last < len(names):
                raise _fail(data, f"task {part!r}: the tasks are numbered 0 to {len(names) - 1}")
            found = names[first : last + 1]
        else:
            near = (
                difflib.get_close_matches(part, names, n=3, cutoff=0.6) or [n for n in names if part and part in n][:3]
            )
            hint = f" (did you mean {', '.join(near)}?)" if near else f"; the tasks are {', '.join(names)}"
            raise _fail(data, f"no task {part!r}{hint}")
        chosen += [n for n in found if n not in chosen]
    return chosen


def read_scienceworld(data: str) -> Collection:
    """The episodes a ScienceWorld spelling names, as a collection of questions of the task type "scienceworld"."""
    chosen, tasks, most, simplify, limit = parse(data)
    names = SIMULATOR.task_names
    split, cut = SETS[chosen]
    # `first-ids`: each episode's world numbered as a fresh simulator numbers it (environments.scienceworld), which a
    # run made before that (its worlds numbered on from the episodes before) must not be resumed with
    questions, digest = [], hashlib.sha256(f"{jar_sha256()}\0{simplify}\0{limit}\0first-ids\0".encode())
    for task in task_list(data, tasks, names):
        variations = SIMULATOR.variations(task, split)
        variations = variations[cut] if cut is not None else variations
        number = names.index(task)
        for variation in variations[:most]:
            episode = Episode(task, variation, simplify, limit)
            digest.update(f"{episode}\0".encode())
            question = f"ScienceWorld task {number} ({task}), {split} variation {variation}"
            questions.append(
                Question(f"{task}-v{variation}", question, "", kind=task, task=SCIENCEWORLD.name, game=str(episode))
            )
    if not questions:
        raise _fail(data, f"the {chosen} set holds no variations of these tasks")
    return Collection(str(data), {}, tuple(questions), SCIENCEWORLD.layout, str(data), digest.hexdigest())
