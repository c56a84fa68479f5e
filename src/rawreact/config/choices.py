"""The names a setting may take, and which go together: methods, loops, grammar modes, repeat policies.

The layers above implement these names (the loops in agents/, the methods in agents/methods.py);
the settings (settings.py) are checked against them before anything runs.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Method:
    """One method: its spelling here, the paper's name, and the reference repository's prompt key."""

    name: str
    paper: str
    reference_key: str


METHODS = {
    m.name: m
    for m in (
        Method("react", "ReAct", "webthink_simple6"),
        Method("act", "Act", "webact_simple6"),
        Method("standard", "Standard", "webqa_simple6"),
        Method("cot", "CoT", "cotqa_simple6"),
        Method("cot-sc", "CoT-SC", "cotqa_simple6"),
        Method("react-cot-sc", "ReAct → CoT-SC", "webthink_simple6 + cotqa_simple6"),
        Method("cot-sc-react", "CoT-SC → ReAct", "cotqa_simple6 + webthink_simple6"),
        Method("tools", "native tool calls", "-"),
        Method("react-reflexion", "ReAct + Reflexion", "-"),
        Method("cot-reflexion", "CoT + Reflexion", "-"),
        Method("lats", "LATS", "-"),
        Method("simple", "Simple (one program)", "-"),
        Method("reflexion", "Reflexion (programs)", "-"),
    )
}

# The methods that write programs (agents/programs.py), the only ones a problem of a program runs by: one
# implementation, or implementations improved on the model's own tests by reflection.
PROGRAMS = ("simple", "reflexion")
PROGRAM_TOKENS = 512  # tokens of one implementation, where --max-tokens is left out (a step's: 100)
PROGRAM_ITERATIONS = 5  # implementations of program reflexion, where --trials is left out
# LATS over programs, where --iterations and --lats-temperature are left out: the repository's programming settings
# (run_lats_gpt4.sh's max_iters 8; func_impl's temperature 0.8).
PROGRAM_LATS = {"iterations": 8, "temperature": 0.8}

# Language Agent Tree Search (Zhou et al., 2024): tree search over ReAct steps (agents/lats.py).
LATS = "lats"
LATS_EVALUATORS = ("em", "supported")  # what rewards a finish: the gold answer (the paper's oracle), or what was read


# Reflexion (Shinn et al., 2023): trials of a method, each after a failed one learning from it.
# Each method's agent: the loop's ReAct, or CoT (answering from the prompt, or from a given context).
REFLEXION = {"react-reflexion": "react", "cot-reflexion": "cot"}


# What the next trial is shown of the failed ones, as the Reflexion code's strategies: nothing (`base`),
# the last trial's trajectory, the reflections written so far, or the last trajectory and its reflection.
STRATEGIES = ("base", "last_trial", "reflexion", "last_trial_and_reflexion")
REFLECTING = ("reflexion", "last_trial_and_reflexion")  # the strategies that call the model for a reflection


# Who decides that a trial failed: the gold answer's exact match (`em`, the Reflexion paper's oracle), or
# `supported`, which needs no gold answer: the answer must occur in what the trial read (its searches and
# lookups, or the context it was given). A game's trial is judged by the game: `won` (the Reflexion paper's ALFWorld).
EVALUATORS = ("em", "supported", "won")


CONTEXTS = ("none", "gold")  # what CoT + Reflexion is given before the question: nothing, or the gold paragraphs


TRIALS = 7  # trials per question: the Reflexion paper's HotpotQA figure plots trials 0 to 6


REFLECT_TOKENS = 250  # tokens of one reflection call, as the reference's reflection model


PAPER = tuple(
    m for m in METHODS if m not in ("tools", LATS, *PROGRAMS) and m not in REFLEXION
)  # the rows of the paper's table


# A back-off's two parts, in the order they run.
BACKOFFS = {"react-cot-sc": ("react", "cot-sc"), "cot-sc-react": ("cot-sc", "react")}


SAMPLING = ("cot-sc", *BACKOFFS)  # the methods that draw CoT-SC samples


REASONING = ("standard", "cot", "cot-sc")  # the methods that answer from the prompt alone, with no action


def first_method(method: str) -> str:
    """The method whose prompt the run's main prompt is: the first part of a back-off, a Reflexion method's agent,
    ReAct for LATS (its steps are ReAct's)."""
    if method == LATS:
        return "react"
    return REFLEXION.get(method) or BACKOFFS.get(method, (method,))[0]


def acts(method: str) -> bool:
    """Whether `method` takes actions, so that a grammar, a loop and the guardrails apply to it."""
    return method not in REASONING and method not in PROGRAMS and REFLEXION.get(method) != "cot"


def guard_problem(method: str, repeats: str, budget: int | None) -> str | None:
    """What is wrong with these guardrails for `method`, or None: they watch actions, which reasoning lacks."""
    problem = setting_problem(repeats, budget)
    if problem:
        return problem
    if not acts(method) and (repeats != "off" or budget is not None):
        return f"the guardrails repeats and budget watch actions, and method {method} takes none; drop them"
    if method == LATS and (repeats != "off" or budget is not None):
        return "the guardrails repeats and budget watch one episode, and LATS searches a tree of them; drop them"
    return None


def reflexion_loop_problem(method: str) -> str:
    """Why a Reflexion method cannot run questions in the reference loop (a game's is the Reflexion code's)."""
    return f"method {method} runs its trials in the tolerant loop; drop the reference loop"


def loop_problem(loop: str, method: str, grammar: bool, repeats: str = "off") -> str | None:
    """What is wrong with running `method` in `loop` (with a grammar or not, and a repeat policy), or None."""
    if loop not in LOOPS:
        return f"loop={loop!r}; the loops are {', '.join(LOOPS)}"
    if method == "tools":
        if loop != "tolerant":
            return "the tools method calls functions, not text actions, so it has no reference loop; drop it"
        if grammar:
            return (
                "the tools method keeps its calls well-formed itself on llama.cpp models (prompts/grammars/"
                "tools.gbnf); drop the grammar"
            )
        return None
    if method == LATS:  # its steps are sampled free, under rawreact's rules (tolerant) or lats.py's (reference)
        if grammar:
            return "LATS samples its steps without a grammar, as its repository does; drop the grammar"
        said = "LATS keeps its own tree, and the guardrails watch one episode; drop --repeats"
        return said if repeats != "off" else None
    if loop == "tolerant":
        return None
    if repeats == "note":
        return "the reference loop shows the notebook's observations, so repeats=note cannot add to them; use stop"
    if method in REASONING:
        return (
            f"the reference loop runs ReAct and Act (the notebook's webthink, and its Act steps), and method "
            f"{method} takes no action; drop the reference loop, or run react, act, react-cot-sc or cot-sc-react"
        )
    if grammar:
        return "the reference loop sends no grammar, as the notebook did; drop the grammar, or use the tolerant loop"
    return None


MAX_TOKENS = 100  # per model call, as in the reference


# The loops, and how many sentences a search shows in each by default: this tolerant one (`react`)
# and the reference notebook's (`reference.reference_react`), whose environment shows five.
LOOPS = {"tolerant": 2, "reference": 5}
# Where each loop's call of a step stops, as a manifest records it: the tolerant loop's once the action line
# is complete (`]` and its line break) or at the next observation, and an action line the token limit cut is
# continued by one more call to its end (from rawreact 0.2.0, issue 68); the reference's at the observation alone.
CALL_STOPS = {"tolerant": "action line or observation; a cut action line continued", "reference": "observation"}


REPEATS = ("off", "note", "stop")  # what a repeated action does: nothing, a note to the model, or the end


def setting_problem(repeats: str, budget: int | None) -> str | None:
    """What is wrong with a repeat policy and a budget, or None."""
    if repeats not in REPEATS:
        return f"repeats={repeats!r}; use one of {', '.join(REPEATS)}"
    if budget is not None and budget < 1:
        return f"budget={budget} must be at least 1 token"
    return None


MODES = ("step", "action", "titles", "commands")  # commands: a game's admissible commands (agents/commands.py)
