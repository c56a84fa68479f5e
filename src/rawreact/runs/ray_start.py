"""Starting a Ray for one run, or joining a cluster: Ray imported only when a run asks for it, a Ray of the run's
own on loopback with a token of its own, stopped with what it started, and a cluster's address checked before Ray
retries it for minutes (`runs.cluster` runs the questions on what this starts)."""

import contextlib
import logging
import os
import secrets
import signal
import socket
import sys
import threading
from pathlib import Path

from rawreact.core.errors import DataError, ModelError

RAY_EXTRA = "pip install 'rawreact[ray]'"


# A Ray started for one run listens on loopback only (Ray's switch for a machine that is not a cluster's node,
# read when Ray is imported and by every process it starts), with token authentication on and a token of the
# run's own, given to its processes through the environment: nothing is written to ~/.ray/auth_token.
LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
QUIET_SIGNALS = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"
_TOKEN_KEYS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")


def import_ray(local: bool = False):
    """Ray, or a DataError that says how to install it; `local`: for a Ray of this process's own, on loopback.

    Imported with Ray's C++ failure handler off in this process (the driver): it printed a stack dump for a
    SIGTERM, which rawreact answers "interrupted". The processes Ray starts later keep theirs."""
    switches = {QUIET_SIGNALS: "1"} | ({LOCAL_ONLY: "0"} if local else {})
    saved = {key: os.environ.get(key) for key in switches} if "ray" not in sys.modules else {}
    os.environ.update({key: switches[key] for key in saved})  # read once, when Ray is imported
    try:
        import ray
    except ImportError:
        raise DataError(f"--ray answers the questions on Ray, which is not installed here; {RAY_EXTRA}") from None
    finally:
        restore_environment(saved)
    return ray


def start_or_join(ray, address: str, temp: str | None = None) -> dict[str, str | None]:
    """Start a Ray for the run (`local`: on loopback, with a token of its own, its session under `temp`, a folder
    in one of mode 0700: Ray makes `temp` and its session's `sockets/`, `logs/` and `runtime_resources/` mode 777
    without the sticky bit, which under the shared /tmp/ray every user could replace), or join the cluster at
    `address` (`auto`: RAY_ADDRESS's); the environment variables it changed, with their values before."""
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING if address != "local" else logging.ERROR}
    if address == "auto" and not os.environ.get("RAY_ADDRESS"):
        raise DataError("--ray-address auto joins the cluster RAY_ADDRESS names, and RAY_ADDRESS is not set")
    if address != "local":
        _reachable(os.environ["RAY_ADDRESS"] if address == "auto" else address)
    saved = _local_only(ray) if address == "local" else {}
    try:
        with _own_sigterm():
            if address == "local":  # a new Ray of this run's own, even where another runs on this machine
                ray.init(address="local", include_dashboard=False, _temp_dir=temp, **quiet)
            else:
                ray.init(address=address, **quiet)
    except (ConnectionError, TimeoutError, ValueError, RuntimeError) as error:
        restore_environment(saved)
        if address == "local":
            raise ModelError(f"cannot start Ray on this machine: {first_line(error)}") from None
        raise DataError(
            f"cannot join the Ray cluster at {address}: {first_line(error)}; if it uses token authentication, give "
            "this process its token (RAY_AUTH_TOKEN, or the file ~/.ray/auth_token), or run with --ray to start a Ray "
            "for this run"
        ) from None
    except BaseException:  # Ctrl-C or SIGTERM while it started: what started of a Ray of the run's own stops
        if address == "local":
            _stop_started(ray)
        restore_environment(saved)
        raise
    return saved


def _stop_started(ray) -> None:
    """Stop a Ray this process was starting when it was interrupted: Ray's own shutdown, then what it left of its
    processes below this one (its raylet's agents outlive it by a minute or two otherwise, as measured)."""
    with contextlib.suppress(Exception):
        ray.shutdown()
    for pid in _ray_children(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _ray_children(root: int) -> list[int]:
    """The processes below `root` that are Ray's (named `ray::...`, run from Ray's package, or a raylet's)."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parents[int(pid)] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    below, more = set(), {root}
    while more:
        more = {pid for pid, parent in parents.items() if parent in more} - below
        below |= more
    found = []
    for pid in below:
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            if command.startswith(b"ray::") or b"/ray/" in command or b"RAY_RAYLET_PID=" in environ:
                found.append(pid)
    return found


def _local_only(ray) -> dict[str, str | None]:
    """Make the Ray about to start listen on loopback only, and admit only the holders of a fresh token, which its
    processes inherit through the environment; the variables' values before."""
    saved = {key: os.environ.get(key) for key in (LOCAL_ONLY, *_TOKEN_KEYS)}
    os.environ.update({LOCAL_ONLY: "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)})
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False  # Ray imported before: its switch was read already
    with contextlib.suppress(Exception):  # Ray reads the mode and the token once; read them again
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    return saved


def restore_environment(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextlib.contextmanager
def _own_sigterm():
    """`ray.init` puts a SIGTERM handler of its own in the main thread's (one that calls `sys.exit(15)`): the
    caller's is put back after it, and a SIGTERM that came while Ray started is handed to the caller's."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ours = signal.getsignal(signal.SIGTERM)
    try:
        yield
    except SystemExit as stop:
        if stop.code != signal.SIGTERM:
            raise
        signal.signal(signal.SIGTERM, ours)
        signal.raise_signal(signal.SIGTERM)  # the caller's handler says what a SIGTERM does (the CLI: interrupted)
        raise KeyboardInterrupt from None  # a handler that returned: the start was interrupted all the same
    finally:
        signal.signal(signal.SIGTERM, ours)


def _reachable(address: str) -> None:
    """Refuse at once a cluster address nothing listens on: Ray itself would retry it for minutes."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # a form Ray reads itself (a ray:// address without a port): Ray says what is wrong with it
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as error:
        raise DataError(
            f"cannot join the Ray cluster at {address}: nothing answers there ({error.strerror or error}); start "
            "one with `ray start --head`, check the address (`ray status` prints it), or run with --ray to start "
            "one for this run"
        ) from None


def first_line(error: object) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
