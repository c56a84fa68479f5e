"""The route of a run's options through the code, from `rawreact run`'s start to its model's load.

    python scripts/route.py [RUN OPTIONS...]      (default: demo --limit 2 --out TMP/run.jsonl)

The command runs in this process under a tracer that stops it where the model would load (`load_model`, or a Ray
cluster's start), so nothing loads. It prints two measures:

- the command's route: the places (functions) that the run command's own code (the `cli` modules past the
  argument parser) calls on its way to the load, and its climbs: the calls that go down a layer, each coming
  back up to the command before it sets off down the next branch (`tests/test_layers.py`'s order of layers).
  This is the walk a reader of `cli/run.py` makes to see what a run checks; issue 71 counted 41 places and 35
  climbs on it before the run plan, by a count this script does not reproduce (its own figure before the plan,
  at commit 4a928b6, was 27 places and 15 climbs), and asked for at most half the places;
- the module route: every module the run enters (import-time code left out), a module entered twice in a row
  counted once, and how often the route steps into a higher layer than the one it leaves. The checks live where
  they did (settings, prompts, grammars, data), so this one moves little; it is printed so that it is watched.
"""

import sys
import tempfile
from pathlib import Path

import rawreact

PACKAGE = Path(rawreact.__file__).parent
LAYERS = ("core", "models", "config", "environments", "tasks", "agents", "runs", "reports", "experiments", "cli")
LOADS = {("models/__init__.py", "load_model"), ("runs/cluster.py", "__init__")}
PARSING = {"rawreact.cli.app", "rawreact.cli.parser", "rawreact.cli.nearest"}  # the command line read, not run


class Loaded(BaseException):
    """Raised where the model would load, which ends the route (a BaseException: the CLI catches the others)."""


def module_of(filename: str) -> str | None:
    path = Path(filename)
    if PACKAGE not in path.parents:
        return None
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def route(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The modules a run with these options enters before its model loads, in order; and the calls the command's
    own code makes on the way, as (caller's module, callee)."""
    from rawreact.cli.app import main

    entered: list[str] = []
    calls: list[tuple[str, str]] = []

    def tracer(frame, event, arg):
        if event != "call":
            return None
        code = frame.f_code
        module = module_of(code.co_filename)
        if module is None or code.co_name == "<module>":
            return None
        if (str(Path(code.co_filename).relative_to(PACKAGE)), code.co_name) in LOADS:
            raise Loaded
        if not entered or entered[-1] != module:
            entered.append(module)
        caller = module_of(frame.f_back.f_code.co_filename) if frame.f_back else None
        if caller and caller.startswith("rawreact.cli.") and caller not in PARSING:
            calls.append((caller, f"{module}.{code.co_qualname}"))
        return None

    sys.settrace(tracer)
    try:
        main(argv)
    except Loaded:
        pass
    finally:
        sys.settrace(None)
    return entered, calls


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        argv = ["run", *(sys.argv[1:] or ["demo", "--limit", "2", "--out", str(Path(folder) / "run.jsonl")])]
        entered, calls = route(argv)
    places = list(dict.fromkeys(callee for _, callee in calls))
    down = sum(layer(callee.rsplit(".", 1)[0]) < layer(caller) for caller, callee in calls)
    print("the command's route (what the run command's own code calls before the load):")
    for place in places:
        print(f"  {place}")
    print(f"  {len(places)} places, {down} climbs back up a layer, {len(calls)} calls")
    modules = list(dict.fromkeys(entered))
    climbs = sum(layer(b) > layer(a) for a, b in zip(entered, entered[1:], strict=False))
    print(f"the module route: {len(modules)} modules, {climbs} climbs back up a layer, {len(entered)} steps")
    print("  " + " -> ".join(m.removeprefix("rawreact.") for m in entered))
    return 0


if __name__ == "__main__":
    sys.exit(main())
