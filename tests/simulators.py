"""What the tests of simulators need beside pip's packages: ScienceWorld's runs in Java."""

import os
import shutil

import pytest


def needs_java() -> None:
    """ScienceWorld's simulator needs Java and the scienceworld package: without them a test says what to install,
    and under CI it fails instead."""
    missing = shutil.which("java") is None
    try:
        import scienceworld  # noqa: F401
    except ImportError:
        missing = True
    if missing:
        message = (
            "ScienceWorld needs Java and scienceworld: sudo apt-get install default-jre-headless, then pip install "
            "'rawreact[scienceworld]'"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
