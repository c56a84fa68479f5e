"""The box a model's program runs in: bubblewrap's `bwrap`, root or not, found once and described in words.

A boxed program has its own user, mount, PID, network, IPC and UTS namespaces (`bwrap --unshare-all`). It sees a
read-only system that holds only what Python needs (`/usr`, the interpreter's own installation, the loader's cache):
no home folder, no project checkout, no run file, no other user's file. Its folder (`/box`), `/tmp` and `/dev/shm`
are tmpfs mounts of a capped size, gone with it; it sees no process but its own, reaches no network, cannot make
another user namespace, holds no capability, and runs under `no_new_privs` (bwrap sets it), so a setuid program
cannot raise its rights. It dies with rawreact (`--die-with-parent`, even after SIGKILL), and when its first process
ends the kernel ends every other process of its PID namespace.

As root, rawreact starts `bwrap` as a user id of the box's own (a random one no account has), so that outside the
box the program is nobody; and where the system lets root make cgroups (v1's `memory` and `pids` hierarchies, as
here), the whole program, every process of it, is held to one memory and one process limit. Elsewhere those limits
hold a process (RLIMIT_AS, and RLIMIT_NPROC counted in the box's own user namespace).

bwrap was chosen over hand-written `unshare` calls: it is made for this job (Flatpak's sandbox), kept by the same
people for a decade, and does the parts that are easy to get wrong (pivot_root, a fresh /proc in the new PID
namespace, dropping capabilities, the parent-death signal) in one reviewed C program.
"""

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rawreact.core.processes import kill_until_gone

BWRAP = "RAWREACT_BWRAP"  # where bwrap is, where it is not on PATH (a path to a missing file: no box)
UID_BASE, UID_SPAN = 2_000_000, 1_000_000  # as root, a box's own user id outside it: one no account has
INSIDE_UID = 1000  # the program's user id inside its box
FOLDER = "/box"  # the program's folder inside its box
CGROUP_V1 = Path("/sys/fs/cgroup")
HIERARCHIES = ("memory", "pids")  # the cgroup v1 hierarchies that hold a whole program
GROUP = "rawreact"  # rawreact's cgroups: GROUP/PID-RANDOM under each hierarchy, one a program
INSTALL = "install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap; pacman -S bubblewrap)"
USERNS = (
    "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 23.10 and later "
    "sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile that lets bwrap make them)"
)
UNBOXED = "--unboxed-programs"  # the option by which a user runs programs without the box, knowing what they give up


@dataclass(frozen=True)
class Box:
    """What this machine gives a program: the box (`boxed`) and the Python it runs in it, the folders it sees
    read-only, the cgroup hierarchies that hold the whole program (empty: limits hold a process), why there is no
    box where there is none, and all of that in words (`said`), as headers and manifests record it."""

    boxed: bool
    bwrap: str | None
    python: str | None
    binds: tuple[tuple[str, str], ...] = ()  # (option, path): --ro-bind or --symlink, in order
    cgroups: tuple[str, ...] = ()
    why: str = ""
    options: frozenset = frozenset({"--size", "--disable-userns"})  # of bwrap's later options, those it has

    @property
    def said(self) -> str:
        if not self.boxed:  # a program runs so only where the user passed UNBOXED
            return f"no box ({UNBOXED}: the program runs with rawreact's rights, limits a process; {self.why})"
        whole = "memory and processes limited for the whole program" if self.cgroups else "limits a process"
        user = "own user id, " if os.geteuid() == 0 else ""
        folders = "tmpfs folder and /tmp" + ("" if "--size" in self.options else " of any size (bwrap before 0.7)")
        return f"a box ({user}own namespaces, read-only system, {folders}, no network, {whole})"

    def refusal(self) -> str:
        """One line: why programs cannot run in their box here, and what to do."""
        return (
            f"programs cannot run in their box here: {self.why}; or pass {UNBOXED} to run them with your own "
            "rights (they can then read and write your files)"
        )

    def argv(self, command: list[str], *, folder: int, tmp: int, shm: int, info_fd: int) -> list[str]:
        """`command` in the box: bwrap's options, then the command; tmpfs sizes in bytes; `info_fd`, where bwrap
        writes the pid of the box's first process."""
        # --as-pid-1: the command is the box's first process, so that when it ends, for whatever reason, the kernel
        # ends every other process in the box (bwrap's own first process would wait for them all)
        argv = [self.bwrap, "--unshare-all", "--unshare-user", "--as-pid-1", "--die-with-parent", "--new-session",
                "--cap-drop", "ALL", "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID),
                "--hostname", "box"]  # fmt: skip
        argv += ["--disable-userns"] if "--disable-userns" in self.options else []  # (bwrap 0.8 and later)

        def tmpfs(size: int, path: str) -> list[str]:  # sized where bwrap can (0.7 and later)
            return (["--size", str(size)] if "--size" in self.options else []) + ["--tmpfs", path]

        for option, path in self.binds:
            argv += [option, os.readlink(path), path] if option == "--symlink" else [option, path, path]
        argv += ["--proc", "/proc", "--dev", "/dev", *tmpfs(shm, "/dev/shm"), *tmpfs(tmp, "/tmp")]
        argv += [*tmpfs(folder, FOLDER), "--chdir", FOLDER]
        argv += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", FOLDER, "--setenv", "TMPDIR",
                 "/tmp", "--setenv", "LANG", "C.UTF-8", "--info-fd", str(info_fd)]  # fmt: skip
        return argv + command


@cache
def box() -> Box:
    """What this process can give a program, found once by starting a box (see the module)."""
    bwrap = os.environ.get(BWRAP) or shutil.which("bwrap")
    if not bwrap or not os.access(bwrap, os.X_OK):
        return Box(False, None, None, why=f"bubblewrap's bwrap is not installed: {INSTALL}")
    remove_stale_cgroups()
    failure, options = "", _options(bwrap)
    for python in _pythons():
        made = Box(True, bwrap, python, _binds(python), _cgroup_roots(), options=options)
        failure = _fails(made)
        if not failure:
            return made
    if "Can't find source path" in failure:  # as root: the box's user id cannot enter the folder of any Python
        return Box(False, bwrap, None, why=f"no Python here that a box's user can run ({failure}): install the "
                   "system's python3 (apt-get install python3)")  # fmt: skip
    if any(word in failure for word in ("uid map", "namespace", "Operation not permitted", "Permission denied")):
        return Box(False, bwrap, None, why=f"the kernel refuses bwrap a user namespace ({failure}): {USERNS}")
    return Box(False, bwrap, None, why=f"bwrap cannot start a box here ({failure})")


def unboxed_python() -> str:
    """The Python a program runs on without a box: rawreact's own, or (as root, whose program runs as a user id of
    its own) the first one any user can run, which a virtual environment under /root is not."""
    candidates = _pythons()
    if os.geteuid() != 0:
        return candidates[0]
    return next((p for p in candidates if _anyone_runs(p)), candidates[0])


def _anyone_runs(path: str) -> bool:
    """Whether a user in no group of the path's can run the file: every folder above it searchable by others."""
    folders = Path(path).parents
    return os.stat(path).st_mode & 0o001 != 0 and all(os.stat(f).st_mode & 0o001 for f in folders)


def _options(bwrap: str) -> frozenset:
    """Which of bwrap's later options this bwrap has (`--size` came in 0.7, `--disable-userns` in 0.8)."""
    try:
        said = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(option for option in ("--size", "--disable-userns") if option in said)


def _pythons() -> list[str]:
    """The Pythons a program may run on, in order: rawreact's own, then the system's."""
    found = [shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin"), "/usr/bin/python3", "/usr/local/bin/python3"]
    system = [os.path.realpath(p) for p in found if p and os.path.isfile(p)]
    return list(dict.fromkeys([os.path.realpath(sys.executable), *system]))


def _binds(python: str) -> tuple[tuple[str, str], ...]:
    """The read-only system a program sees: /usr, the top folders that lead into it (as links where they are
    links), the loader's cache, and the interpreter's own installation where it is not under /usr."""
    binds = [("--ro-bind", "/usr")]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            binds.append(("--symlink", top))
        elif os.path.isdir(top):
            binds.append(("--ro-bind", top))
    if os.path.isfile("/etc/ld.so.cache"):
        binds.append(("--ro-bind", "/etc/ld.so.cache"))
    prefix = str(Path(python).parent.parent)  # PREFIX/bin/python3.X: its standard library is under PREFIX/lib
    if not prefix.startswith("/usr/") and prefix != "/usr":
        binds.append(("--ro-bind", prefix))
    return tuple(binds)


def _fails(made: Box) -> str:
    """Why `made` cannot run its Python in a box here ("" where it can)."""
    read, write = os.pipe()
    try:
        argv = made.argv([made.python, "-I", "-S", "-c", "pass"], folder=1 << 20, tmp=1 << 20, shm=1 << 20,
                         info_fd=write)  # fmt: skip
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False, pass_fds=(write,), env={},
                              cwd="/", **as_user(own_uid()))  # fmt: skip
    except (OSError, subprocess.SubprocessError) as error:
        return str(error)
    finally:
        os.close(read)
        os.close(write)
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return "" if done.returncode == 0 else (lines[-1] if lines else f"exit status {done.returncode}")


def own_uid() -> int | None:
    """As root, a fresh user id for a box (one no account has); otherwise None: the box runs as the user."""
    return UID_BASE + secrets.randbelow(UID_SPAN) if os.geteuid() == 0 else None


def as_user(uid: int | None) -> dict:
    """Popen's options that start a process as `uid` (in no group but its own), or none."""
    return {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}


def _cgroup_roots() -> tuple[str, ...]:
    """The cgroup v1 hierarchies that can hold a whole program (memory and pids, both, where rawreact may make
    groups in them: as root), made ready; none elsewhere."""
    roots = [CGROUP_V1 / name for name in HIERARCHIES]
    try:
        if not all((root / "cgroup.procs").is_file() and os.access(root, os.W_OK) for root in roots):
            return ()
        for root in roots:
            (root / GROUP).mkdir(exist_ok=True)
    except OSError:
        return ()
    return tuple(str(root / GROUP) for root in roots)


class Cgroups:
    """One program's cgroups (memory and pids), made with its limits, joined by its first process, and removed after
    every process in them is killed."""

    def __init__(self, roots: tuple[str, ...], uid: int | None, memory: int, processes: int) -> None:
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.paths = [Path(root, name) for root in roots]
        for path in self.paths:
            path.mkdir()
            if uid is not None:  # its first process joins them as that user, before it starts anything
                os.chown(path / "cgroup.procs", uid, uid)
        memory_group, pids_group = self.paths
        (memory_group / "memory.limit_in_bytes").write_text(str(memory))
        with contextlib.suppress(OSError):  # where swap is counted, so that swap is no way round the limit
            (memory_group / "memory.memsw.limit_in_bytes").write_text(str(memory))
        (pids_group / "pids.max").write_text(str(processes))

    def joining(self, argv: list[str]) -> list[str]:
        """`argv`, started by a shell that first moves itself into the cgroups (then `exec`s it)."""
        script = (
            "".join(f'echo $$ > "${i + 1}" && ' for i in range(len(self.paths)))
            + f'shift {len(self.paths)} && exec "$@"'
        )
        return ["/bin/sh", "-c", script, "sh", *(str(p / "cgroup.procs") for p in self.paths), *argv]

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the program at its memory limit."""
        try:
            control = (self.paths[0] / "memory.oom_control").read_text()
        except OSError:
            return False
        return any(line.split()[0] == "oom_kill" and int(line.split()[1]) > 0 for line in control.splitlines())

    def remove(self) -> None:
        """Kill every process left in the cgroups, then remove them."""
        for path in self.paths:
            _empty(path)


def _empty(path: Path) -> None:
    def members() -> list[int]:
        try:
            return [int(pid) for pid in (path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    kill_until_gone(members, rounds=500)
    with contextlib.suppress(OSError):
        path.rmdir()


def remove_stale_cgroups() -> None:
    """Remove the cgroups (and kill what is in them) that a rawreact which is no longer running left."""
    for root in (CGROUP_V1 / name / GROUP for name in HIERARCHIES):
        with contextlib.suppress(OSError):
            for path in root.iterdir():
                owner = path.name.split("-")[0]
                if path.is_dir() and owner.isdigit() and not Path("/proc", owner).exists():
                    _empty(path)
