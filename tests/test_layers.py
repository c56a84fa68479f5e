"""The folder layout is the architecture: each subpackage imports only the layers its docstring
allows, and no module imports one that imports it back (read from the source with `ast`)."""

import ast
import re
from pathlib import Path

import rawreact

PACKAGE = Path(rawreact.__file__).parent
# Bottom to top; the root modules (the public API, the console script, `python -m`) sit above all.
LAYERS = ("core", "models", "config", "environments", "tasks", "agents", "runs", "reports", "experiments", "cli")


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str) -> set[str]:
    """Every rawreact module `name` imports, anywhere in it (inside functions and TYPE_CHECKING too)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != name}
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def _layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _allowed(layer: str) -> set[str]:
    """The layers a subpackage's docstring says it may import."""
    doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text(encoding="utf-8"))) or ""
    line = re.search(r"^May import: (.*)$", doc, re.MULTILINE)
    assert line, f"rawreact/{layer}/__init__.py's docstring says nothing of what it may import"
    text = line.group(1).rstrip(".")
    if text == "every layer":
        return set(LAYERS)
    if text.startswith("nothing"):
        return {layer}
    return {word.strip() for word in text.split(",")} | {layer}


def test_every_module_lives_in_a_layer_or_is_a_root_entry_point():
    roots = {name for name in MODULES if _layer(name) is None}
    assert roots == {"rawreact", "rawreact.__main__", "rawreact.console"}


def test_each_layer_imports_only_the_layers_its_docstring_allows():
    wrong = []
    for layer in LAYERS:
        allowed = _allowed(layer)
        assert allowed <= set(LAYERS), f"{layer}: its docstring names an unknown layer"
        below = set(LAYERS[: LAYERS.index(layer) + 1])
        assert allowed <= below, f"{layer}'s docstring allows a layer above it: {sorted(allowed - below)}"
        for name, targets in GRAPH.items():
            if _layer(name) == layer:
                # The root package holds only the version and lazy public names: every layer may read it.
                wrong += [(name, t) for t in targets if t != "rawreact" and _layer(t) not in allowed]
    assert wrong == []


def test_no_module_imports_one_that_imports_it_back():
    cycles, state = [], {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(GRAPH[name]):
            if state.get(target) == "open":
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_the_checker_sees_the_imports_it_must_see():
    """The graph is read right: a lazy import inside a function and a TYPE_CHECKING import both count."""
    assert "rawreact.models.llama" in GRAPH["rawreact.models"]  # imported inside load_model
    assert "rawreact.environments.store" in GRAPH["rawreact.environments.env"]  # under TYPE_CHECKING
    assert "rawreact.core.errors" in GRAPH["rawreact.core.resources"]


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module that is not a docstring, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_the_agents_know_no_verb_by_name_but_finish():
    """Issue 41: the loops, grammar, guardrails, records and tools read the environment's declared verbs;
    only `finish`, which ends every episode, is named in the agents' code."""
    from rawreact import PASSAGE_VERBS
    from rawreact.environments.game import GAME_VERBS

    names = [verb.name for verb in (*PASSAGE_VERBS, *GAME_VERBS) if verb.name != "finish"]
    word = re.compile(r"\b(" + "|".join(names) + r")\b(?!\s+\w)|^(" + "|".join(names) + r"):", re.IGNORECASE)
    found = [
        (name, line, text)
        for name, path in MODULES.items()
        if _layer(name) == "agents"
        for line, text in _strings(path)
        if word.fullmatch(text.strip()) or re.search(r"\b(" + "|".join(names) + r")(\[|: )", text, re.IGNORECASE)
    ]
    assert found == []


def test_the_verb_check_sees_a_verb_named_in_the_agents(tmp_path):
    """The check above is not blind: the code that counted searches by name before issue 41 is caught."""
    from rawreact import PASSAGE_VERBS

    names = [verb.name for verb in PASSAGE_VERBS if verb.name != "finish"]
    old = tmp_path / "old.py"
    old.write_text(
        'def searches(steps):\n    """Searches."""\n    return sum(s.action.name == "search" for s in steps)\n'
    )
    word = re.compile(r"\b(" + "|".join(names) + r")\b(?!\s+\w)", re.IGNORECASE)
    assert [text for _, text in _strings(old) if word.fullmatch(text.strip())] == ["search"]


def _names_a_task_type(tree: ast.AST, names: set[str]) -> list[str]:
    """Where a module tests or spells a task type by its name: a comparison of something named like a task
    with a type's name, a mapping keyed by two or more types' names, `task=NAME` or a `task` default, and a
    record's `"task": NAME`."""

    def named(node) -> bool:
        values = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
        return any(isinstance(v, ast.Constant) and v.value in names for v in values)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and "task" in ast.unparse(node).lower():
            if any(named(side) for side in [node.left, *node.comparators]):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if sum(k in names for k in keys) >= 2:
                found.append(ast.unparse(node)[:60])
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "task" and named(value):
                    found.append(ast.unparse(node)[:60])
        elif isinstance(node, ast.keyword) and node.arg == "task" and named(node.value):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.arguments):
            positional = node.posonlyargs + node.args
            pairs = list(zip(positional[len(positional) - len(node.defaults) :], node.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d is not None]
            found += [f"{a.arg}={ast.unparse(d)}" for a, d in pairs if a.arg == "task" and named(d)]
    return found


def test_no_module_outside_the_task_declarations_names_a_task_type():
    """Task types are declarations (`core.tasks`), as verbs are: a module that needs what a type does reads
    its declaration (its scores, its scoring, its unit, its reference files), and never tests its name."""
    from rawreact.core.tasks import TASK_TYPES

    names = set(TASK_TYPES)
    found = {
        name: places
        for name, path in MODULES.items()
        if name != "rawreact.core.tasks"
        and (places := _names_a_task_type(ast.parse(path.read_text(encoding="utf-8")), names))
    }
    assert found == {}


def test_the_task_type_check_finds_what_it_looks_for():
    """The check above, on code that names task types in each of the ways it looks for, and on code that
    reads the declarations instead."""
    names = {"qa", "fever", "game"}
    naming = [
        'if question.task == "game": pass',
        'x = r.get("task") in ("fever", "game")',
        'x = {"qa": 1, "fever": 2}[task]',
        'f(task="fever")',
        'def f(task: str = "qa"): pass',
        'record = {"task": "game", "success": 1}',
    ]
    for text in naming:
        assert _names_a_task_type(ast.parse(text), names), text
    reading = ['if task_type(question.task).scoring == "outcome": pass', 'loop = "game"', 'f(agent="game")']
    for text in reading:
        assert not _names_a_task_type(ast.parse(text), names), text


def test_a_module_over_400_lines_says_at_its_top_why_it_is_one_room():
    """Rooms hold one idea: a module grows past 400 lines only with a sentence in its docstring ("One room: ...")
    on why its parts belong together; else it is split along the seams its readers use."""
    long = {}
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 400:
            long[name] = "One room: " in (ast.get_docstring(ast.parse(text)) or "")
    assert [name for name, said in long.items() if not said] == []
