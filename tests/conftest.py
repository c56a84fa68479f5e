"""Shared fixtures: the real embedded model (loaded once), the demo data, the shared HotpotQA sample."""

import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

from rawreact import load_collection, load_model
from rawreact.models.base import Completion

# No deadline: a busy CI machine must not turn a slow example into a failure.
settings.register_profile("rawreact", deadline=None)
settings.load_profile("rawreact")

ROOT = Path(__file__).resolve().parent.parent
HOTPOTQA = Path(
    os.environ.get("RAWREACT_HOTPOTQA", ROOT.parent / "shared" / "data" / "hotpotqa" / "dev_distractor_first100.json")
)


@pytest.fixture(scope="session")
def gemma():
    """The embedded default model, real weights, loaded once for the whole test run."""
    return load_model("gemma3-270m", n_ctx=8192)


@pytest.fixture(scope="session")
def demo():
    return load_collection()


@pytest.fixture(scope="session")
def hotpotqa():
    """The 100 shared HotpotQA dev questions (official layout); read from ../shared, never copied."""
    if not HOTPOTQA.is_file():
        pytest.fail(
            f"the HotpotQA sample is missing at {HOTPOTQA}: put the workplace's shared/ folder beside this "
            "checkout, or set RAWREACT_HOTPOTQA to a file in the official HotpotQA layout"
        )
    return json.loads(HOTPOTQA.read_text(encoding="utf-8"))


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
