"""Errors that are ours or the infrastructure's, never the model's.

The model's mistakes become observations (see `loop.py`); everything here is raised to the
caller, names the file, value or model concerned, and says what to do next.
"""


class RawreactError(Exception):
    """Base of every error rawreact raises on purpose; the CLI prints these without a traceback."""


class DataError(RawreactError):
    """A passage collection, question file or other data file is missing or malformed."""


class PromptError(RawreactError):
    """A prompt file is missing, malformed, or asks for something it does not have."""


class ModelError(RawreactError):
    """A model cannot be found, loaded or called."""


class ContextLengthExceeded(ModelError):
    """The prompt no longer fits the model's context window."""


class ServerLost(ModelError):
    """A server stopped answering: a refused connection, a timeout, a cut reply or a 5xx, after its retries."""


class EpisodeLost(ModelError):
    """The server an episode ran on was lost mid-episode: the episode must start over on another (see
    models.fleet); its partial steps are discarded, never written. `url` is the server's, when known."""

    def __init__(self, message: str, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class GrammarError(RawreactError):
    """A grammar file does not parse, or a backend cannot apply a grammar."""


class EnvironmentSetupError(RawreactError):
    """An environment or a verb is declared so that it cannot work (two verbs of one name, a name the
    grammar cannot hold, a verb shadowing finish), or an `--env` import path does not load."""
