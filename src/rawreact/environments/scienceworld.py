"""`ScienceWorldEnv`: one episode of ScienceWorld (Wang et al., 2022), the simulator of 30 elementary-science tasks.

An episode is a task and one of its variations, under a set of simplifications ("easy", as SwiftSage runs it)
and the simulator's own step limit. An action is a command line (`open door to kitchen`) or `think: ...`,
which the simulator never sees and answers `OK.`. The opening is the task's description, then what
`look around` shows; each observation is the simulator's reply on one line. The score is ScienceWorld's own,
0 to 100: the episode is won at 100, and a negative score (a wrong `focus on`) ends it as lost, with its
score counted 0, as SwiftSage counts it. `admissible` lists the valid action-object combinations of the step,
which `--grammar commands` turns into the only lines a model may write.

The simulator is a Java program (scienceworld's jar, through py4j). One JVM serves every episode of a
process: each episode has its own `PythonInterface` in it (a JVM holds 1.2 GB), and episodes on several
threads take turns in it, a call at a time (`JVM`): its simulators share the state they draw worlds from.
It is started by the first episode or data read that needs it (off the main thread, so Ctrl-C never lands in
py4j), and ended when the process ends (atexit; a process killed outright breaks the JVM's pipe, and the JVM
ends itself: py4j's `--die-on-broken-pipe`). scienceworld is an optional extra (`pip install 'rawreact[scienceworld]'`).
"""

import atexit
import contextlib
import hashlib
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rawreact.core.actions import Action, parse_command
from rawreact.core.errors import DataError
from rawreact.environments.game import GAME_VERBS, THOUGHT_SEEN

SPLITS = ("train", "dev", "test")
SIMPLIFY = "easy"  # SwiftSage's --simplification_str
ENV_STEPS = 100  # SwiftSage's --env_step_limit, and ScienceWorldEnv's own default
TASK_HEAD = "Task Description:\n"  # what `taskdescription()` starts with (SwiftSage drops its 18 characters)
WON = 100


def _java_missing() -> str:
    return (
        "ScienceWorld runs its simulator in Java, and no java is on the PATH: install a Java runtime "
        "(Debian or Ubuntu: sudo apt-get install default-jre-headless; macOS: brew install openjdk), then run again"
    )


def _import():
    """scienceworld's module, or a DataError saying how to install it (and Java, which it needs)."""
    try:
        import scienceworld
    except ImportError:
        raise DataError(
            "ScienceWorld needs the scienceworld package: pip install 'rawreact[scienceworld]' (or pip install "
            "scienceworld), and a Java runtime (Debian: apt-get install default-jre-headless)"
        ) from None
    if shutil.which("java") is None:
        raise DataError(_java_missing())
    return scienceworld


# py4j is not safe to interrupt: a KeyboardInterrupt (Ctrl-C, SIGTERM) raised inside one of its calls leaves a
# traceback in its log and an AttributeError after it. The main thread's calls run on these threads instead,
# and the main thread waits for them, so an interrupt lands in the wait, never in py4j.
_CALLS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="scienceworld")


def in_jvm(work):
    """`work()`, with the JVM to itself (`JVM`), on a thread of its own when called from the main thread."""

    def done():
        with JVM:
            return work()

    if threading.current_thread() is not threading.main_thread():
        return done()
    return _CALLS.submit(done).result()


def _off_main(method):
    """`method` of scienceworld's environment, run by `in_jvm`, its Java list made a Python list there."""

    def call(*args, **kwargs):
        def done():
            result = method(*args, **kwargs)
            return list(result) if type(result).__module__.startswith("py4j") else result

        return in_jvm(done)

    call.__name__, call.__doc__ = method.__name__, method.__doc__
    return call


class _Simulator:
    """The process's one JVM, started when first needed; `episode()` is a new, independent simulator in it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._env = None  # scienceworld's ScienceWorldEnv that started the JVM
        self._names: list[str] = []
        self._episode = None  # the class of an episode's simulator, made once the JVM runs
        self._probe = None  # the simulator the data's variations are read from

    def _started(self):
        if threading.current_thread() is threading.main_thread():
            # the JVM starts off the main thread, which waits: Ctrl-C or SIGTERM lands in the wait, not in py4j
            return _CALLS.submit(self._started).result()
        with self._lock:
            if self._env is None:
                module = _import()
                try:
                    env = module.ScienceWorldEnv("", envStepLimit=ENV_STEPS)
                except Exception as error:  # noqa: BLE001 - py4j raises several kinds when the JVM cannot start
                    raise DataError(f"ScienceWorld's simulator (Java) did not start: {error}") from None
                atexit.register(self.stop)  # at once: a start the main thread stopped waiting for ends too
                self._env = env
                self._names = list(self._env.get_task_names())
            return self._env

    @property
    def task_names(self) -> list[str]:
        """The 30 task names, in the order ScienceWorld gives them (SwiftSage numbers tasks by it, from 0)."""
        self._started()
        return list(self._names)

    def episode(self, step_limit: int = ENV_STEPS):
        """A new simulator in the JVM, with ScienceWorldEnv's own methods (`load`, `reset`, `step`, ...)."""
        env = self._started()
        with self._lock:
            if self._episode is None:
                self._episode = _episode_class(env)
            made = self._episode
        return in_jvm(lambda: made(step_limit))  # its interface is made in the JVM too: one call at a time

    def variations(self, task: str, split: str) -> list[int]:
        """The variations of `task` in `split` (train, dev or test), as ScienceWorld divides them."""
        probe = self._probe = self._probe or self.episode()
        read = {"train": probe.get_variations_train, "dev": probe.get_variations_dev, "test": probe.get_variations_test}
        return in_jvm(lambda: (probe.load(task, 0, ""), list(read[split]()))[1])

    @property
    def running(self) -> bool:
        """Whether this process's JVM is running."""
        return self._env is not None

    def stop(self) -> None:
        """End the JVM, and wait for it to be gone."""
        with self._lock:
            env, self._env, self._episode, self._probe = self._env, None, None, None
        if env is None:
            return
        process = env._gateway.java_process
        with contextlib.suppress(Exception):
            env._gateway.shutdown()
        if process is not None and process.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                process.stdin.close()  # --die-on-broken-pipe: the JVM ends when its input closes
            try:
                process.wait(timeout=10)
            except Exception:  # noqa: BLE001 - it did not end by itself
                process.kill()
                process.wait()


def first_ids(sim) -> None:
    """Number the objects of the world about to load from where a fresh simulator numbers them. The JVM numbers
    every object it makes from one counter (scienceworld's `util.UniqueTypeID`), and a world's layout follows the
    numbers (which room an agent starts in, the order a room lists its things in): so an episode's world would
    depend on every load and step before it in the process, and at --workers above 1 on how they interleaved."""
    getattr(sim._gateway.jvm.util.UniqueTypeID, "nextID_$eq")(0)


def _episode_class(env):
    """The class of an episode's simulator: scienceworld's ScienceWorldEnv on `env`'s JVM, with an interface of its
    own, its calls off the main thread (`_off_main`), and a `close` that ends nothing."""
    cls = type(env)

    class Episode(cls):
        load, reset, step, inventory, taskdescription = map(_off_main, (cls.load, cls.reset, cls.step,
                                                              cls.inventory, cls.taskdescription))  # fmt: skip
        get_valid_action_object_combinations = _off_main(cls.get_valid_action_object_combinations)
        get_gold_action_sequence = _off_main(cls.get_gold_action_sequence)
        get_variations_train, get_variations_dev, get_variations_test = map(_off_main, (
            cls.get_variations_train, cls.get_variations_dev, cls.get_variations_test))  # fmt: skip

        def __init__(self, step_limit: int) -> None:  # noqa: D107 - ScienceWorldEnv's fields, without a JVM of its own
            self._gateway = env._gateway
            self.server = env._gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()
            self.lastStepScore, self.taskName, self.envStepLimit = 0, None, step_limit
            self.goldPathGenerated, self.simplificationStr, self.variationIdx = False, "", 0

        def close(self) -> None:
            pass

    return Episode


SIMULATOR = _Simulator()
# One call at a time in the JVM, and an episode's load, reset and description in one go: the simulators of one
# JVM draw their worlds from state they share, so an episode loading beside another's call could start in another
# room (measured: 4 of 6 episodes differed at --workers 2). tests/test_hardening5_games.py plays both ways.
JVM = threading.RLock()


@dataclass(frozen=True)
class Episode:
    """What an episode plays: a task, one of its variations, the simplifications and the simulator's step limit."""

    task: str
    variation: int
    simplify: str = SIMPLIFY
    limit: int = ENV_STEPS

    def __str__(self) -> str:
        return f"scienceworld:{self.task}:{self.variation}:{self.simplify or 'none'}:{self.limit}"

    @classmethod
    def parse(cls, text: str) -> "Episode":
        """`scienceworld:TASK:VARIATION:SIMPLIFY:LIMIT`, as `str` writes it."""
        parts = text.split(":")
        if len(parts) != 5 or parts[0] != "scienceworld" or not parts[2].isdigit() or not parts[4].isdigit():
            raise DataError(f"{text!r} is not a ScienceWorld episode (scienceworld:TASK:VARIATION:SIMPLIFY:LIMIT)")
        return cls(parts[1], int(parts[2]), "" if parts[3] == "none" else parts[3], int(parts[4]))


def is_episode(game: str) -> bool:
    """Whether a question's game is a ScienceWorld episode (not a game file)."""
    return game.startswith("scienceworld:")


def one_line(text: str) -> str:
    """The simulator's text on one line: its line breaks and tabs as spaces, runs of spaces as one."""
    return " ".join(text.split())


class ScienceWorldEnv:
    """One ScienceWorld episode: a task's variation, played from its start by command lines and thoughts."""

    verbs = GAME_VERBS
    style = "commands"
    described = True  # it says which commands it admits at each step

    def __init__(self, episode: Episode | str) -> None:
        self.episode = Episode.parse(episode) if isinstance(episode, str) else episode
        self.path = str(self.episode)  # what messages name it by
        self.layout = "scienceworld"
        self._sim = None
        self.answer: str | None = None
        self.opening, self.description, self.look, self.obs = "", "", "", ""
        self.admissible: list[str] = []
        self.score, self.moves, self.won, self.lost, self.finished = 0, 0, False, False, False
        self.info: dict = {}

    def fresh(self) -> "ScienceWorldEnv":
        """The same episode, not yet started."""
        return ScienceWorldEnv(self.episode)

    @property
    def simulator(self):
        """ScienceWorld's own environment object for this episode (scienceworld's `ScienceWorldEnv`)."""
        if self._sim is None:
            self._sim = SIMULATOR.episode(self.episode.limit)
        return self._sim

    def start(self, gold_path: bool = False) -> tuple[str, dict]:
        """Load the episode (with the simulator's gold path made, where `gold_path`) and start it: the first
        observation and info as the simulator gives them. `description` is its `taskdescription()`."""
        sim, ep = self.simulator, self.episode

        def load() -> tuple[str, dict, str]:  # in one go: no other episode's call comes between
            first_ids(sim)
            try:
                sim.load(ep.task, ep.variation, ep.simplify, generateGoldPath=gold_path)
            except ValueError as error:  # an unknown task or simplification: ScienceWorld's message names them
                raise DataError(f"{self.path}: {error}") from None
            return (*sim.reset(), sim.taskdescription())

        obs, info, self.description = in_jvm(load)
        self.score, self.won, self.lost, self.finished, self.moves = 0, False, False, False, 0
        self.answer, self.obs = None, ""
        self.update(info, False)
        return obs, info

    def reset(self) -> None:
        """Start the episode from its beginning: `opening` is the task's description, then the room it starts in."""
        obs, _ = self.start()
        task = self.description[len(TASK_HEAD) :] if self.description.startswith(TASK_HEAD) else self.description
        self.opening = f"{one_line(task)}\n{one_line(obs)}"

    def update(self, info: dict, done: bool) -> None:
        """Take in what the simulator said after a step (its info, and whether it is done): the commands valid
        now, the moves, the score (0 when negative, and lost), won at 100."""
        self.info = info
        self.admissible = sorted(info.get("valid") or [])
        self.look, self.moves = info.get("look", ""), info.get("moves", 0)
        score = info.get("score", 0)
        self.lost = score < 0
        self.score = 0 if self.lost else score  # SwiftSage counts a negative score 0
        self.won = self.score >= WON
        self.finished = done

    @property
    def done(self) -> bool:
        """Whether the episode is over: won, lost (a negative score) or past the simulator's step limit."""
        return self.won or self.lost or self.finished

    @property
    def reward(self) -> float:
        """The score as a share, 0 to 1."""
        return self.score / WON

    def step(self, action: str | Action) -> tuple[str, bool]:
        """Carry out one command or thought; (observation, done). An episode over answers as it ended."""
        parsed = parse_command(action, self.verbs) if isinstance(action, str) else action
        if not self.description:
            self.reset()
        if self.done:
            return self.obs, True
        if parsed is None:
            self.obs = "No known action matches that input."
            return self.obs, False
        if parsed.name == "think":
            return THOUGHT_SEEN, False
        obs, _, done, info = self.simulator.step(parsed.arg)
        self.update(info, done)
        self.obs = one_line(obs) or "Nothing happens."
        return self.obs, self.done

    def gold_path(self) -> list[str]:
        """The simulator's own solution of the episode (its gold path), as commands."""
        ep, sim = self.episode, self.simulator

        def load() -> list[str]:
            first_ids(sim)
            sim.load(ep.task, ep.variation, ep.simplify, generateGoldPath=True)
            return list(sim.get_gold_action_sequence())

        return in_jvm(load)

    def close(self) -> None:
        """Let go of the episode's simulator (the JVM goes on serving others)."""
        self._sim = None


def jar_sha256() -> str:
    """The SHA-256 of the simulator's jar that runs the episodes: a run's data is this simulator's."""
    from scienceworld.constants import JAR_PATH

    return hashlib.sha256(Path(JAR_PATH).read_bytes()).hexdigest()
