"""Runs on a Ray cluster: actors across its nodes answer the questions; the driver writes the run file alone.

An actor holds what is costly to make once: the model (the embedded one with its own `--workers` streams, or a
client of the run's servers) and the questions' environments, made from the run's plan (`runs.plan.RunPlan`),
which goes to the cluster once through Ray's object store. The driver (the process of `rawreact run --ray`)
keeps every actor at most `--workers` questions in hand, so what is in flight is bounded, and writes each result
as it comes back. A question whose actor or node dies runs again on another actor, and its record counts it
(`ray.restarts`, `ray.lost_on`), as a fleet's records count a lost server. Ray is imported here and in
`runs.ray_start` (which starts or joins it) only, and only when a run asks for it.

One room: the driver and its actors are two ends of one protocol (feeding ids, streaming results back, a lost
actor's questions sent again), each written against the other.
"""

import contextlib
import os
import queue
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

from rawreact import __version__
from rawreact.config.choices import REFLEXION
from rawreact.config.settings import Settings
from rawreact.core.errors import DataError, ModelError, RawreactError
from rawreact.models.base import WORKER
from rawreact.models.specs import is_embedded
from rawreact.runs.plan import RunPlan
from rawreact.runs.ray_start import first_line, import_ray, restore_environment, start_or_join
from rawreact.runs.results import Result
from rawreact.runs.run import MAX_RESTARTS, RunFile, _written, answerer
from rawreact.runs.setup import model_facts
from rawreact.runs.trials import TrialLog
from rawreact.tasks.collection import Question

# Seconds the driver waits for an actor to be placed and its model loaded before it says the cluster has no room.
PLACING = 300.0
# Seconds an actor lets answers gather, once one is done, before it sends them back together.
GATHER = 0.005


def actor_threads(settings: Settings) -> int | str | None:
    """The embedded model's threads in an actor: `--threads`, else the CPUs the actor reserves (at least 1), so
    actors that share a node do not each take all its cores; None for a model that decodes elsewhere."""
    if not is_embedded(settings.model):
        return None
    return settings.threads if settings.threads is not None else max(1, int(settings.actor_cpus))


class Answerer:
    """A Ray actor's work: a plan's model and environments, and questions answered on them, `--workers` at once.

    The driver `feed`s it question ids; `--workers` threads of its own answer them, each on a stream of the
    model's own (`WORKER`); `stream` sends the answers back as they finish, those that finish close together
    in one item. Two calls a batch instead of a call a question: a Ray call costs the driver more CPU than
    writing the record it brings (benchmarks/scale.py --ray).
    """

    def __init__(self, plan: RunPlan) -> None:
        self.plan, self._inbox, self._outbox = plan, queue.SimpleQueue(), queue.SimpleQueue()
        self._questions = {question.id: question for question in plan.questions}

    def start(self) -> dict:
        """Load the model and check the prompt fits it; what the run records of the model, and where this runs."""
        import ray

        plan, settings = self.plan, self.plan.settings
        model = plan.load_model(n_threads=actor_threads(settings))  # checked as the driver's plan says
        options = dict(plan.options)
        reflexion = options.pop("reflexion", None)
        answer = answerer(plan.envs(), model, plan.prompt, reflexion=reflexion, **options)
        node = ray.get_runtime_context().get_node_id()
        for index in range(settings.workers):
            threading.Thread(target=self._work, args=(index, answer, node), daemon=True).start()
        facts = model_facts(model, is_embedded(settings.model))
        return facts | {"node": node, "pid": os.getpid(), "rawreact": __version__}

    def _work(self, index: int, answer: Callable[[Question], Result], node: str) -> None:
        WORKER.set(index)
        while True:
            question_id = self._inbox.get()
            try:
                result = answer(self._questions[question_id])
            except Exception as error:  # noqa: BLE001 (sent to the driver, which stops the run with it)
                if not isinstance(error, RawreactError):
                    error = ModelError(
                        f"question {question_id} on node {_short(node)} failed: {type(error).__name__}: "
                        f"{first_line(error)}"
                    )
                self._outbox.put((question_id, error, None))
                continue
            # the record, worked out here; the result without its question, which the driver has
            self._outbox.put((question_id, result.to_dict(), replace(result, question=None)))

    def feed(self, question_ids: list[str]) -> None:
        """Questions to answer, by id."""
        for question_id in question_ids:
            self._inbox.put(question_id)

    def stream(self) -> Iterator[list[tuple]]:
        """The answers, as they finish: (id, record, result), or (id, error, None) for a question that failed."""
        while True:
            done = [self._outbox.get()]
            time.sleep(GATHER)  # those that finish close behind go in the same item
            while True:
                try:
                    done.append(self._outbox.get_nowait())
                except queue.Empty:
                    break
            yield done

    def cpu_seconds(self) -> float:
        """This actor's process's CPU seconds so far (benchmarks/scale.py)."""
        return time.process_time()


@dataclass(eq=False)
class _Slot:
    """An actor as the driver sees it: its number, its node and answers' stream once started, and the questions
    in its hand (by id: the question, and the nodes lost under it before)."""

    number: int
    handle: object
    node: str | None = None
    answers: object = None
    hand: dict = field(default_factory=dict)


class Cluster:
    """Ray started (`--ray`) or joined (`--ray-address`), the plan's actors made and started, and `run` handing
    them the questions. A context manager: leaving it kills the actors, so the cluster's work for this run stops,
    and stops the Ray it started (a joined cluster stays up)."""

    def __init__(self, settings: Settings, plan: RunPlan) -> None:
        self.ray = ray = import_ray(local=settings.ray == "local")
        self.settings, self.workers = settings, settings.workers
        self.address = settings.ray
        self._saved: dict[str, str | None] = {}  # the environment a Ray of the run's own changed, restored after it
        self._temp: str | None = None  # a Ray of the run's own: its temp dir, removed after it
        if ray.is_initialized():  # a script that called ray.init() itself: the run uses that Ray
            self.owned = False
        else:
            self.owned = True
            if settings.ray == "local":
                self._temp = tempfile.mkdtemp(prefix="rawreact-ray-")
            try:
                self._saved = start_or_join(
                    ray, settings.ray, None if self._temp is None else os.path.join(self._temp, "ray")
                )
            except BaseException:
                self._remove_temp()
                raise
        self.slots: list[_Slot] = []
        self._starting: dict = {}  # a started actor's `start` call, by its ref
        self._made = 0
        try:
            nodes = self.nodes()
            count = settings.actors or len(nodes)
            cpus = sum(node["resources"].get("CPU", 0) for node in nodes)
            if count * settings.actor_cpus > cpus:
                raise DataError(
                    f"{count} actors at {settings.actor_cpus:g} CPU each need {count * settings.actor_cpus:g} CPUs, "
                    f"and the Ray cluster has {cpus:g}; lower --actors or --actor-cpus, or add nodes"
                )
            self._plan = ray.put(plan)  # once to the object store: each actor reads it from there
            self._actor = ray.remote(Answerer).options(
                num_cpus=settings.actor_cpus,
                max_concurrency=3,  # its stream of answers, a feed, and a count of its CPU, at once
                max_restarts=0,  # a dead actor's questions are the driver's to hand out again (counted)
                scheduling_strategy="SPREAD",
            )
            for _ in range(count):
                self._make()
            self.facts = self._wait_started()
            self.started_nodes = nodes
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def nodes(self) -> list[dict]:
        """The cluster's live nodes: id, address and resources."""
        found = [n for n in self.ray.nodes() if n.get("Alive")]
        return [
            {
                "id": n["NodeID"],
                "address": n.get("NodeManagerAddress"),
                "resources": {k: v for k, v in n.get("Resources", {}).items() if not k.startswith("node:")},
            }
            for n in found
        ]

    def described(self) -> dict:
        """The manifest's record of the cluster: Ray's version, where it ran, its nodes and the actors."""
        return {
            "version": self.ray.__version__,
            "cluster": self.address,
            "nodes": self.started_nodes,
            "actors": len(self.slots),
            "actor_cpus": self.settings.actor_cpus,
            "actor_threads": actor_threads(self.settings),
        }

    def _make(self) -> None:
        handle = self._actor.remote(self._plan)
        slot = _Slot(self._made, handle)
        self._made += 1
        self._starting[handle.start.remote()] = slot

    def _wait_started(self) -> dict:
        """Wait for the actors made so far to load their models; the first one's facts."""
        facts, deadline = None, time.monotonic() + PLACING
        while self._starting:
            ready, _ = self.ray.wait(list(self._starting), num_returns=1, timeout=0.5)
            if not ready:
                if time.monotonic() > deadline:
                    raise ModelError(self._no_room())
                continue
            found = self._started(ready[0])
            facts = facts or found
        return facts

    def _started(self, ref) -> dict:
        """An actor's `start` call come back: the actor is ready for questions, or its error is raised."""
        slot = self._starting.pop(ref)
        try:
            found = self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as error:
            raise _cause(error, f"a Ray actor on node {_short(slot.node)}") from None
        except self.ray.exceptions.RayActorError as error:
            raise ModelError(f"a Ray actor died while loading its model: {first_line(error)}") from None
        if found["rawreact"] != __version__:  # its answers would come from other code than the manifest says
            self.ray.kill(slot.handle, no_restart=True)
            raise ModelError(
                f"the Ray node {_short(found['node'])} runs rawreact {found['rawreact']}, and this driver "
                f"{__version__}; install rawreact {__version__} on every node of the cluster"
            )
        slot.node = found["node"]
        slot.answers = slot.handle.stream.options(num_returns="streaming").remote()
        self.slots.append(slot)
        return found

    def _lost(self, slot: _Slot, again: deque, error: BaseException) -> RawreactError | None:
        """A dead actor's questions, put first in line to run again, each counting the node it was lost on; a new
        actor in its place. The error that stops the run when a question has been lost too often, else None."""
        self.slots.remove(slot)
        with contextlib.suppress(Exception):  # it may only be unreachable: it must not go on
            self.ray.kill(slot.handle, no_restart=True)
        failure = None
        for question, lost in reversed(list(slot.hand.values())):
            lost = (*lost, slot.node or "?")
            if len(lost) > MAX_RESTARTS:
                failure = failure or ModelError(
                    f"question {question.id} lost its Ray actor {len(lost)} times; last on node {_short(slot.node)} "
                    f"({first_line(error)})"
                )
            again.appendleft((question, lost))
        slot.hand.clear()
        self._make()
        return failure

    def _no_room(self) -> str:
        return (
            f"no Ray actor of {self.settings.actor_cpus:g} CPUs was ready after {PLACING:g} s: the cluster has no "
            f"room for it (`ray status` shows its resources); lower --actor-cpus, or add a node"
        )

    def run(self, questions: Iterable[Question], stop: Callable[[], bool] | None = None) -> Iterator[Result]:
        """Hand the questions to the actors, at most `--workers` to each at once, and yield each result as it
        comes back. A question whose actor dies goes to another (a new actor takes the dead one's place); an
        error of the run's own stops the handing out, and is raised once the questions in flight are back."""
        ray = self.ray
        errors = ray.exceptions
        lost_errors = (StopIteration, errors.RayActorError, errors.WorkerCrashedError, errors.NodeDiedError)
        source, again, exhausted = iter(questions), deque(), False
        failure, placing_since = None, None
        while True:
            stopped = stop is not None and stop()
            if failure is None and not stopped:
                for slot in self.slots:
                    batch = []
                    while len(slot.hand) < self.workers:
                        item = again.popleft() if again else None
                        if item is None and not exhausted:
                            question = next(source, None)
                            exhausted = question is None
                            item = None if exhausted else (question, ())
                        if item is None:
                            break
                        slot.hand[item[0].id] = item
                        batch.append(item[0].id)
                    if batch:
                        slot.handle.feed.remote(batch)
            flying = any(slot.hand for slot in self.slots)
            if not flying and (failure is not None or stopped or (exhausted and not again)):
                break
            if not flying and not self.slots:  # every actor died: wait for a new one to start
                placing_since = placing_since or time.monotonic()
                if not self._starting or time.monotonic() - placing_since > PLACING:
                    raise ModelError(self._no_room())
            streams = {slot.answers: slot for slot in self.slots if slot.hand}
            ready, _ = ray.wait([*streams, *self._starting], num_returns=1, timeout=0.2)  # a timeout: Ctrl-C is heard
            for found in ready:
                if found in self._starting:
                    try:
                        self._started(found)
                        placing_since = None
                    except RawreactError as error:
                        failure = failure or error
                    continue
                slot = streams[found]
                try:
                    answers = ray.get(next(slot.answers))
                except lost_errors as error:  # the actor or its node died: its questions go elsewhere
                    failure = failure or self._lost(slot, again, error)
                    continue
                except errors.RayTaskError as error:  # the stream itself failed: a fault of ours, which stops the run
                    failure = failure or _cause(error, f"the answers of a Ray actor on node {_short(slot.node)}")
                    self.slots.remove(slot)
                    slot.hand.clear()
                    continue
                for question_id, record, result in answers:
                    question, lost = slot.hand.pop(question_id)
                    if result is None:  # the question's own error: the run stops, with that error
                        failure = failure or record
                        continue
                    placed = {"node": slot.node, "actor": slot.number, "restarts": len(lost), "lost_on": list(lost)}
                    yield replace(result, question=question, ray=placed, record=record | {"ray": placed})
        if failure is not None:
            raise failure

    def cpu_seconds(self) -> float:
        """The CPU seconds of every live actor's process so far (benchmarks/scale.py)."""
        return sum(self.ray.get([slot.handle.cpu_seconds.remote() for slot in self.slots]))

    def close(self) -> None:
        """Kill this run's actors (the questions they hold stop), and stop the Ray this run started."""
        for slot in [*self.slots, *self._starting.values()]:
            with contextlib.suppress(Exception):  # an actor already gone
                self.ray.kill(slot.handle, no_restart=True)
        self.slots, self._starting = [], {}
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()
            self.owned = False
        restore_environment(self._saved)
        self._saved = {}
        self._remove_temp()

    def _remove_temp(self) -> None:
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None


def _cause(error, where: str) -> RawreactError:
    """The error an actor raised, as the driver raises it: rawreact's own as it was, anything else named."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, RawreactError):
        return cause
    return ModelError(f"{where} failed: {type(cause).__name__ if cause else 'error'}: {first_line(cause or error)}")


def _short(node: str | None) -> str:
    return "?" if node is None else node[:12]


def ray_questions(
    questions: Iterable[Question],
    cluster: Cluster,
    *,
    out: RunFile | None = None,
    stop: Callable[[], bool] | None = None,
) -> Iterator[Result]:
    """`run_questions` on a cluster: the questions the run file does not hold yet, answered by the cluster's
    actors and appended to the run file (by this process alone) as each comes back."""
    pending = (q for q in questions if out is None or q.id not in out.done)
    log = None
    if cluster.settings.method in REFLEXION and out is not None:  # trials under way are not kept on Ray (below)
        log = TrialLog(out.path, "", resumed="resumes" in out.manifest)
    return _written(cluster.run(pending, stop), out, log)


__all__ = ["Answerer", "Cluster", "import_ray", "ray_questions"]
