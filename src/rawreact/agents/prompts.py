"""Few-shot prompts: an instruction and solved exemplars, read from data files.

Two sources: the project's own layout (`prompts/instruction.txt` and an exemplar file with one
exemplar per block, blocks separated by a blank line), and a JSON file laid out like the reference
repository's `prompts_naive.json` (a dict of named prompt strings; the user names the key).

One room: both sources end in the same `Prompt` (its text, exemplar count, source and hash), and reading
exemplars, instructions, keys and a Python file's strings is one parser's work, whose errors name the same file
and line; the pieces are small and each is used by the others.
"""

import ast
import hashlib
import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from rawreact.core.actions import PASSAGE_VERBS, Verbs
from rawreact.core.errors import PromptError
from rawreact.core.files import read_whole
from rawreact.core.folders import NAMED, split_named
from rawreact.core.resources import resource
from rawreact.core.tasks import QA, TASK_TYPES, task_type
from rawreact.environments.game import ALFWORLD_KINDS, NEAREST_KIND

_BLOCKS = re.compile(r"\n[ \t]*\n")
# Where each method's shipped instruction and exemplars are, under prompts/ (ReAct's at the top).
FOLDERS = {"react": "", "act": "act/", "standard": "standard/", "cot": "cot/", "cot-sc": "cot/", "tools": "tools/"}
# Reflexion's prompts: CoT given a context, and the reflections written after a failed ReAct or CoT trial.
FOLDERS |= {"cot-context": "cot/context/", "reflect-react": "reflexion/", "reflect-cot": "reflexion/cot/"}
FOLDERS["reflect-game"] = "games/reflexion/"  # a game's reflections
STARTS = {
    "cot-context": "Context",
    "reflect-game": "Task",
}  # what an exemplar starts with, where it is not the question's header


def _relative(method: str, task: str, name: str) -> str:
    """A shipped prompt file under prompts/: a task type's own folder (`core.tasks`), with each method's in it,
    ReAct's at the top for questions (fever/react/ and the like for the others)."""
    folder = task_type(task).prompts
    if not folder:
        return f"{FOLDERS[method]}{name}"
    if method == "tools":
        raise PromptError("the tools method answers questions; run FEVER claims with the paper's methods")
    return f"{folder}{FOLDERS[method] or 'react/'}{name}"


def shipped(method: str, task: str, name: str) -> Path:
    """The path of a shipped prompt file of `method` for `task`, such as its instruction.txt."""
    return resource("prompts", _relative(method, task, name))


@dataclass(frozen=True)
class Prompt:
    """The text sent before `Question: ...`, with where it came from."""

    text: str
    source: str
    exemplars: int | None  # None: no one text (a repository's prompts, put together call by call)
    # A prompt file's exemplars by key, where each episode takes its own (SwiftSage's, by task number: the key
    # `{task}`), and the words its episode starts with (the code's `prompt = '...' + ...`).
    keyed: Mapping[str, str] | None = None
    episode_head: str = ""

    @property
    def sha256(self) -> str:
        """A hash of the text (and of the exemplars by key, where it has them), so a run records exactly which
        prompt it used."""
        if self.keyed is None:
            return hashlib.sha256(self.text.encode()).hexdigest()
        keyed = json.dumps(dict(self.keyed), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(f"{self.text}\0{keyed}\0{self.episode_head}".encode()).hexdigest()


def exemplar_verbs(text: str) -> list[str]:
    """The verbs a prompt's exemplars act with (`Action 2: Search[...]` gives "search"), each once, in order."""
    return list(dict.fromkeys(name.lower() for name in re.findall(r"^Action \d+:\s*([A-Za-z_]\w*)\[", text, re.M)))


def read_text(path: Path) -> str:
    """A prompt file's text as it is, or a PromptError naming the file (the Reflexion code reads its examples
    file whole)."""
    return read_bytes_and_text(path)[1]


def read_bytes_and_text(path: Path) -> tuple[bytes, str]:
    """A prompt file's bytes and its text, read once (a run hashes the bytes it sends the text of)."""
    try:
        data = read_whole(path)
        return data, data.decode("utf-8-sig")
    except OSError as error:
        raise PromptError(f"{path}: cannot read the prompt file: {error.strerror}") from None
    except UnicodeDecodeError:
        raise PromptError(f"{path}: not UTF-8 text; save the prompt file as UTF-8") from None


def read_exemplars(path: str | Path | None = None, method: str = "react", task: str = QA.name) -> list[str]:
    """The exemplars of a file (by default the method's for the task): blocks separated by blank
    lines, each starting `Question:` (`Claim:` for FEVER)."""
    path = Path(path) if path else shipped(method, task, "exemplars.txt")
    header = STARTS.get(method, task_type(task).header)
    text = read_text(path).replace("\r\n", "\n").strip("\n")
    exemplars, line = [], 1
    for block in _BLOCKS.split(text):
        if not block.startswith(f"{header}:"):
            raise PromptError(
                f"{path} line {line}: an exemplar must start with '{header}:', found {block[:40]!r}; "
                "separate exemplars with one blank line"
            )
        exemplars.append(block.strip("\n") + "\n")
        line += block.count("\n") + 2
    return exemplars


def read_instruction(path: str | Path | None = None, method: str = "react", task: str = QA.name) -> str:
    """The instruction text (by default the method's for the task), ending with one newline; an empty file gives "".

    `NOTEBOOK.ipynb#NAME` is the string a code cell of that notebook assigns to NAME, taken as it is:
    the reference's HotpotQA instruction is `hotpotqa.ipynb#instruction` in a checkout of its repository.
    """
    file, name = split_named(str(path)) if path else ("", None)
    if name is not None:
        return (notebook_string if file.endswith(".ipynb") else python_string)(Path(file), name)
    if file.endswith(NAMED):  # the file is code: using it whole would send its source as the instruction
        raise PromptError(f"{path} is code; name the string it assigns to the instruction, as in {path}#NAME")
    path = Path(path) if path else shipped(method, task, "instruction.txt")
    text = read_text(path).rstrip("\n")
    return text + "\n" if text.strip() else ""


def notebook_string(path: Path, name: str) -> str:
    """The string that a code cell of the Jupyter notebook `path` assigns to `name` (`name = "..."`), or, where
    the cell joins strings around other values (`prompt = '...' + d[...] + '...'`, as alfworld.ipynb frames
    its exemplars), the strings before the first value (`notebook_frame` gives both ends)."""
    return notebook_frame(path, name)[0]


def notebook_frame(path: Path, name: str) -> tuple[str, str]:
    """What a code cell of the notebook `path` assigns to `name`, as (before, after): a string is (it, ""); a
    sum of strings and other values (`'head' + d[a] + d[b] + 'tail'`) is the strings before its first value
    and those after its last. Assignments count at any depth of a cell (inside its loops and functions); the
    first sum that frames values wins over plain strings (alfworld.ipynb also sets `prompt = ''` in its loop
    function), else the first string."""
    try:
        cells = json.loads(read_text(path)).get("cells", [])
    except (json.JSONDecodeError, AttributeError):
        raise PromptError(f"{path}: not a Jupyter notebook (JSON with 'cells')") from None
    plain = None
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        try:
            tree = ast.parse("".join(source) if isinstance(source, list) else str(source))
        except SyntaxError:  # a cell of shell or magic commands
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
                found = _frame(node.value)
                if found is not None and not isinstance(node.value, ast.Constant):
                    return found
                plain = plain if plain is not None else found
    if plain is not None:
        return plain
    raise PromptError(f"{path}: no code cell assigns a string to {name!r}; is it the reference's notebook?")


def _frame(value: ast.expr) -> tuple[str, str] | None:
    """A string's (it, ""), or a sum's strings before its first other value and after its last; None for
    anything else."""
    parts, stack = [], [value]
    while stack:  # the terms of `a + b + c`, left to right
        node = stack.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            stack += [node.right, node.left]
        else:
            parts.append(node)
    strings = [isinstance(p, ast.Constant) and isinstance(p.value, str) for p in parts]
    if all(strings):
        return "".join(p.value for p in parts), ""
    if not strings[0]:
        return None
    first, last = strings.index(False), len(strings) - strings[::-1].index(False)
    return "".join(p.value for p in parts[:first]), "".join(p.value for p in parts[last:])


def python_string(path: Path, name: str) -> str:
    """The string a Python file assigns to `name` at its top level (`NAME = "..."`), taken as it is:
    the Reflexion code's prompts and exemplars are `prompts.py#REFLECT_INSTRUCTION` and `fewshots.py#REFLECTIONS`
    in a checkout of its repository."""
    return python_strings(path, (name,))[name]


def python_strings(path: Path, names: tuple[str, ...], text: str | None = None) -> dict[str, str]:
    """`python_string` of each of `names`, the file read and parsed once (`text`: what was read of it already)."""
    try:
        tree = ast.parse(read_text(path) if text is None else text)
    except SyntaxError as error:
        raise PromptError(f"{path} line {error.lineno}: not Python: {error.msg}") from None
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    strings = {}
    for name in names:
        # the Reflexion code's alfworld_runs builds its prompts inside functions
        inner = found[name] if name in found else _inner_string(tree, name)
        if inner is None:
            known = ", ".join(sorted(found)) or "none"
            raise PromptError(f"{path}: no top-level string named {name!r}; its strings are: {known}")
        strings[name] = inner
    return strings


def _inner_string(tree: ast.AST, name: str) -> str | None:
    """What an assignment to `name` anywhere in the code makes of strings: a string; an f-string, with each
    value it puts in kept as `{expression}` (a template: `f"...{FEW_SHOT_EXAMPLES}..."`); or a sum of strings
    and other values, its strings before the first value (`'...' + d[a] + d[b]`: the words before them)."""
    for node in ast.walk(tree):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if [getattr(t, "id", None) for t in targets] != [name] or node.value is None:
            continue
        if isinstance(node.value, ast.JoinedStr):
            return "".join(
                v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}" for v in node.value.values
            )
        found = _frame(node.value)
        if found is not None:
            return found[0]
    return None


def load_prompt(
    exemplars: str | Path | None = None,
    *,
    k: int | None = None,
    instruction: str | Path | None = None,
    key: str | None = None,
    order: int | None = None,
    method: str = "react",
    task: str = QA.name,
) -> Prompt:
    """Build a prompt: instruction, then the first `k` exemplars (all when k is None).

    The files default to the `method`'s shipped ones for the `task` (see FOLDERS and core.tasks: FEVER's
    are under prompts/fever/); an empty instruction file means no instruction.

    `order` = S shuffles the chosen exemplars with `random.Random(S)`, for order ablations.

    An exemplar file ending in `.json` is read as a reference-style prompt dict, and `key` names
    the prompt inside it; that prompt is used whole, after the instruction, as the reference does.
    Only HotpotQA's ReAct prompt gets the default instruction: the reference's Standard, CoT and Act
    prompts (`webqa_simple6`, `cotqa_simple6`, `webact_simple6`) start with their first exemplar, and
    its FEVER prompts (`fever.json`) carry their own instruction, which FEVER.ipynb sends with
    nothing in front; for them an instruction is added only when one is named. The key `{task}` takes each
    episode's exemplar from the file by its task's number (SwiftSage's `prompt.jsonl`: `Prompt.keyed`).
    """
    if method not in FOLDERS:
        raise PromptError(f"no prompt for method {method!r}; the methods with prompts are {', '.join(FOLDERS)}")
    if task not in TASK_TYPES:
        raise PromptError(f"no prompts for task {task!r}; the tasks are {', '.join(TASK_TYPES)}")
    if method == "tools":  # native tool calls: a system message alone, no exemplars
        if exemplars is not None or key is not None or k is not None or order is not None:
            raise PromptError(
                "the tools method has no exemplars: its prompt is the system message; give it with --instruction"
            )
        text = read_instruction(instruction, "tools", task)
        return Prompt(text=text, source=str(instruction or "prompts/tools/instruction.txt"), exemplars=0)
    if exemplars is not None and str(exemplars).endswith(".py"):  # the Reflexion code's fewshots.py
        if key is None:
            raise PromptError(f"{exemplars}: name the string to use with --key (or --reflect-key), such as REFLECTIONS")
        if k is not None or order is not None:
            raise PromptError(f"{exemplars}#{key} is used whole; drop -k and the order")
        # The Reflexion code's strings end without a line break; its template follows them with a blank line.
        text = python_string(Path(exemplars), key).rstrip("\n") + "\n\n"
        instruction_text = "" if instruction is None else read_instruction(instruction, method, task)
        return Prompt(text=instruction_text + text, source=f"{exemplars}#{key}", exemplars=text.count("Question:"))
    # SwiftSage's prompt file of one exemplar per task is JSON, named .jsonl
    reference = exemplars is not None and (str(exemplars).endswith(".json") or key == TASK_KEY)
    # The reference prepends its instruction to its HotpotQA ReAct prompt only; its other prompts, and
    # its FEVER prompts (which carry their own instruction: FEVER.ipynb sends nothing before them), stand alone.
    alone = method != "react" or task_type(task).reference.own_instruction
    instruction_text = (
        "" if reference and instruction is None and alone else read_instruction(instruction, method, task)
    )
    if reference:
        if order is not None:
            raise PromptError(f"order={order}: a reference prompt ({exemplars}) is used whole and cannot be shuffled")
        if key == TASK_KEY:  # each episode takes the exemplar of its task (SwiftSage's `d[str(task_num)]`)
            return _keyed_prompt(Path(exemplars), k, instruction_text, instruction)
        file, name = split_named(str(instruction)) if instruction else ("", None)
        after = notebook_frame(Path(file), name)[1] if name is not None and file.endswith(".ipynb") else ""
        if key is not None and KIND_KEY in key:  # each game takes its kind's exemplars (alfworld.ipynb's `v`)
            return _kind_prompt(Path(exemplars), key, k, instruction_text, after)
        made = _reference_prompt(Path(exemplars), key, k, instruction_text)
        return replace(made, text=made.text + after) if after else made  # a notebook's frame: what follows them
    if key is not None:
        raise PromptError(f"--key {key!r} applies to a reference JSON prompt file, not to {exemplars}")
    blocks = read_exemplars(exemplars, method, task)
    source = str(exemplars or f"prompts/{_relative(method, task, 'exemplars.txt')}")
    if k is not None and not 0 <= k <= len(blocks):
        raise PromptError(f"k={k} exemplars asked for, but {source} has {len(blocks)}")
    chosen = blocks if k is None else blocks[:k]
    if order is not None:
        random.Random(order).shuffle(chosen)
        source += f" (order {order})"
    text = instruction_text + "".join(block + "\n" for block in chosen)
    return Prompt(text=text, source=source, exemplars=len(chosen))


def json_string(path: Path, key: str | None, option: str = "--key") -> str:
    """The prompt string under `key` of a reference-style JSON file (an object of prompt strings); `option`
    is the command-line option that names the key, for the error that lists the keys."""
    try:
        prompts = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise PromptError(f"{path} line {error.lineno}: not valid JSON: {error.msg}") from None
    if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
        raise PromptError(f"{path}: a reference prompt file must be a JSON object of prompt strings")
    if key is None or key not in prompts:
        asked = "no key was given" if key is None else f"it has no key {key!r}"
        raise PromptError(f"{path}: {asked}; choose one with {option}: {', '.join(sorted(prompts))}")
    return prompts[key]


TASK_KEY = "{task}"  # --key of a prompt file whose exemplars are chosen per episode, by its task's number
EPISODE_HEAD = "prompt"  # the name SwiftSage's eval_agent_react.py gives the text each episode starts with


def _keyed_prompt(path: Path, k: int | None, instruction: str, source: str | None) -> Prompt:
    """A prompt file of one exemplar per task (SwiftSage's prompt.jsonl: a JSON object keyed "0" to "29"), each
    episode taking its task's, after the instruction; with an instruction named in a Python file (`FILE.py#NAME`),
    the words that file's `prompt` starts with begin each episode."""
    if k is not None:
        raise PromptError(f"k={k}: a prompt of one exemplar per task ({path}) takes its task's; drop -k")
    try:
        prompts = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise PromptError(f"{path} line {error.lineno}: not valid JSON: {error.msg}") from None
    if not isinstance(prompts, dict) or not prompts or not all(isinstance(v, str) for v in prompts.values()):
        raise PromptError(f"{path}: a prompt of one exemplar per task is a JSON object of strings, keyed by number")
    file, name = split_named(str(source)) if source else ("", None)
    head = python_string(Path(file), EPISODE_HEAD) if name is not None and file.endswith(".py") else ""
    return Prompt(text=instruction, source=f"{path}#{TASK_KEY}", exemplars=1, keyed=prompts, episode_head=head)


KIND_KEY = "{kind}"  # in --key, a game's kind of ALFWorld (put, clean, heat, cool, examine, puttwo)


def _kind_prompt(path: Path, key: str, k: int | None, instruction: str, after: str) -> Prompt:
    """A reference prompt whose exemplars each game takes by its kind (`react_{kind}_1+react_{kind}_0`, as
    alfworld.ipynb and the Reflexion code pick `d[f'react_{v}_1'] + d[f'react_{v}_0']`): the instruction, the
    exemplars of each kind the file has (`keyed`), and the frame's words after them (`episode_head`)."""
    if k is not None:
        raise PromptError(f"k={k}: a reference prompt ({path}, {key}) is used whole; drop -k")
    keyed = {}
    for kind in ALFWORLD_KINDS.values():
        parts = key.replace(KIND_KEY, kind).split("+")
        try:
            keyed[kind] = "".join(json_string(path, part) for part in parts)
        except PromptError:
            continue  # the file has no exemplars of this kind
    if NEAREST_KIND not in keyed:
        raise PromptError(
            f"{path}: --key {key} takes each game's exemplars by its kind, and the file has none for "
            f"{key.replace(KIND_KEY, NEAREST_KIND)} (the kind of a game that names none)"
        )
    return Prompt(text=instruction, source=f"{path}#{key}", exemplars=2, keyed=keyed, episode_head=after)


def framed(prompt: Prompt | str, kind: str | None) -> Prompt | str:
    """The prompt a game of `kind` is played with: a prompt keyed by kind (`KIND_KEY`) made whole with that kind's
    exemplars (`put`, the nearest, for a game that names none), any other as it is."""
    if isinstance(prompt, str) or prompt.keyed is None or KIND_KEY not in prompt.source:
        return prompt
    chosen = kind if kind in prompt.keyed else NEAREST_KIND
    return replace(prompt, text=prompt.text + prompt.keyed[chosen] + prompt.episode_head, keyed=None, episode_head="")


def _reference_prompt(path: Path, key: str | None, k: int | None, instruction: str) -> Prompt:
    # `A+B` joins two strings in that order, as alfworld.ipynb joins `react_put_1` and `react_put_0`.
    text = "".join(json_string(path, part) for part in (key or "").split("+")) if key and "+" in key else None
    text = json_string(path, key) if text is None else text
    if k is not None:
        raise PromptError(f"k={k}: a reference prompt ({path}, {key}) is used whole; drop -k")
    exemplars = text.count("Question:") + text.count("Claim:") + text.count("Your task is to:")
    return Prompt(text=instruction + text, source=f"{path}#{key}", exemplars=exemplars)


_NUMBERED = re.compile(r"^\((\d+)\) ", re.MULTILINE)
_KINDS = re.compile(r"\bone of (\w+) kinds\b")
_COUNTS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def with_actions(text: str, verbs: Verbs) -> str:
    """The prompt `text` with the environment's verbs beyond the passage set listed, each as the
    declaration describes it: after the instruction's numbered list of actions (`(3) Finish[answer] ...`),
    whose "one of three kinds" is counted again; before everything when the text has no such list.

    A verb the text already names (`Calculate[`) is not listed again, so this is idempotent; the passage
    set alone leaves the text as it is, byte for byte.
    """
    extra = [v for v in verbs if PASSAGE_VERBS.get(v.name) != v and v.arg in ("bracket", "none")]
    extra = [v for v in extra if f"{v.shown}[" not in text]
    if not extra:
        return text
    numbered = list(_NUMBERED.finditer(text))
    if not numbered:
        return "You may also take these actions:\n" + "".join(f"- {v.listed()}\n" for v in extra) + text
    last = numbered[-1]
    n = int(last.group(1))
    end = text.find("\n", last.end())
    end = len(text) if end < 0 else end + 1
    lines = "".join(f"({n + k}) {v.listed()}\n" for k, v in enumerate(extra, 1))
    head = text[:end] if text[:end].endswith("\n") else text[:end] + "\n"
    total = len(numbered) + len(extra)
    word = _COUNTS[total] if total < len(_COUNTS) else str(total)
    head = _KINDS.sub(lambda m: f"one of {word} kinds" if m.group(1) in _COUNTS else m.group(0), head, count=1)
    return head + lines + text[end:]
