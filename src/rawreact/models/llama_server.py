"""Build llama.cpp's C++ `llama-server` from the llama.cpp source that the installed llama-cpp-python carries.

The server is built from the same llama.cpp commit as the embedded engine (llama-cpp-python's sdist
vendors it), for this CPU (a native build), and statically linked, so that a comparison of the two
measures rawreact's engine and not two versions of llama.cpp. Only the `llama-server` target is
built. The binary goes into a cache keyed by the CPU's flags and llama-cpp-python's version, as
`.ci/run` keys the wheel; a second call finds it there and builds nothing. It prints the binary's path
(on stdout, the only line there) and how long the build took (on stderr). Nothing prebuilt is downloaded:
pip fetches the source distribution from PyPI and cmake compiles it here.

    python -m rawreact.models.llama_server [--jobs N] [--force]

Tests and benchmarks find the binary with `server_path()`, or through RAWREACT_LLAMA_SERVER; `start` runs it.
"""

import argparse
import hashlib
import importlib.metadata
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

from rawreact.core.folders import cache_home

NAME = "rawreact.models.llama_server"
FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",  # one file, which can be copied into the cache
    "-DGGML_NATIVE=ON",  # for this CPU, as the README's commands build llama-cpp-python
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",  # the server reads a local file; nothing to download
]


def cpu_key() -> str:
    """The first 12 hex digits of the SHA-256 of /proc/cpuinfo's first flags line (with its newline), as `.ci/run`
    names the wheelhouse."""
    for line in Path("/proc/cpuinfo").read_text().splitlines(keepends=True):
        if line.startswith("flags"):
            return hashlib.sha256(line.encode()).hexdigest()[:12]
    return "unknown"


def cache_dir() -> Path:
    version = importlib.metadata.version("llama-cpp-python")
    return cache_home() / "llama-server" / f"native-{cpu_key()}-{version}"


def server_path() -> Path | None:
    """The built server: RAWREACT_LLAMA_SERVER if set, else the cache's binary; None when neither exists."""
    given = os.environ.get("RAWREACT_LLAMA_SERVER")
    path = Path(given) if given else cache_dir() / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(
    model: str | Path,
    *,
    parallel: int = 1,
    threads: int = 2,
    n_ctx: int = 4096,
    port: int = 0,
    repack: bool | None = None,
    binary: Path | None = None,
    wait: float = 120.0,
    kv_unified: bool = False,
    cache_ram: int | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start the built llama-server on loopback serving `model` with `parallel` slots of `n_ctx` tokens each, and
    wait until its /health answers; (the process, its base URL ending in /v1). `stop` ends it.

    Loaded as the embedded model loads (`--swa-full`, so that Gemma 3 can reuse a prompt; weights repacked as
    `repack` says, None: as models.build decides for this build), with greedy defaults that rawreact sends anyway.
    Each slot has a KV cache of its own unless `kv_unified` (llama.cpp's `--kv-unified`: one cache for all slots),
    and `cache_ram` sets the MiB of the server's host-memory prompt cache (`--cache-ram`; 0 turns it off; None:
    llama.cpp's default); benchmarks/throughput.py measures both on a model.
    """
    binary = binary or server_path()
    if binary is None:
        raise FileNotFoundError("no llama-server is built; build it with: python -m rawreact.models.llama_server")
    port = port or free_port()
    command = [str(binary), "--model", str(model), "--host", "127.0.0.1", "--port", str(port), "--threads",
               str(threads), "--threads-batch", str(threads), "--parallel", str(parallel), "--ctx-size",
               str(n_ctx * parallel), "--kv-unified" if kv_unified else "--no-kv-unified", "--swa-full",
               "--no-webui"]  # fmt: skip
    if cache_ram is not None:
        command += ["--cache-ram", str(cache_ram)]
    if not (_repacks() if repack is None else repack):
        command.append("--no-repack")
    base = f"http://127.0.0.1:{port}"
    return serve(command, f"{base}/health", "llama-server", wait), f"{base}/v1"


def serve(command: list[str], probe: str, name: str, wait: float = 120.0) -> subprocess.Popen:
    """Start a server process and wait until `probe` (a URL) answers; the process, which `stop` ends.

    Its log goes to a temporary file (`process.log`), not a pipe, which could fill up; a server that exits or does
    not answer within `wait` seconds is a RuntimeError quoting the end of its log.
    """
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by stop)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)
    process.log = log
    deadline = time.monotonic() + wait
    while True:
        if process.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"{name} exited ({process.returncode}): {log.read()[-2000:]}")
        try:
            with urllib.request.urlopen(probe, timeout=2):
                return process
        except OSError:
            pass
        if time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"{name} did not answer within {wait:g} s")
        time.sleep(0.2)


def stop(process: subprocess.Popen) -> None:
    """End a server that `start` started (SIGTERM, then SIGKILL after 20 s)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    process.log.close()


def _repacks() -> bool:
    from rawreact.models.build import loads

    return loads()["repack"]


def build(jobs: int) -> Path:
    version = importlib.metadata.version("llama-cpp-python")
    target = cache_dir()
    with tempfile.TemporaryDirectory(prefix="rawreact-llama-server-") as tmp:
        started, cpu = time.monotonic(), _children_cpu()
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", "-d", tmp]
        subprocess.run([*pip, f"llama-cpp-python=={version}"], check=True)
        [sdist] = Path(tmp).glob("llama_cpp_python-*.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp, filter="data")
        source = next(Path(tmp).glob("llama_cpp_python-*/vendor/llama.cpp"))
        out, log = Path(tmp) / "build", Path(tmp) / "build.log"
        for step in (["-S", source, "-B", out, *FLAGS], ["--build", out, "--target", "llama-server", f"-j{jobs}"]):
            with log.open("a") as written:  # the compiler's warnings run to megabytes: kept, shown on failure
                done = subprocess.run([_cmake(), *step], stdout=written, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                last = "\n".join(log.read_text().splitlines()[-30:])
                raise SystemExit(f"{NAME}: cmake failed (exit {done.returncode}); its last lines:\n{last}")
        seconds, cpu = time.monotonic() - started, _children_cpu() - cpu
        target.mkdir(parents=True, exist_ok=True)
        binary = target / "llama-server"
        shutil.copy2(out / "bin" / "llama-server", binary.with_suffix(".part"))
        os.replace(binary.with_suffix(".part"), binary)
    said = {
        "llama_cpp_python": version,
        "flags": FLAGS,
        "jobs": jobs,
        "seconds": round(seconds),
        "cpu_seconds": round(cpu),
    }
    (target / "build.json").write_text(json.dumps(said, indent=1) + "\n")
    print(f"built llama-server from llama-cpp-python {version}'s llama.cpp in {seconds:.0f} s ({cpu:.0f} CPU-s, "
          f"{jobs} jobs)", file=sys.stderr)  # fmt: skip
    return binary


def _cmake() -> str | None:
    """cmake on PATH, or the one PyPI's `cmake` package put beside this Python."""
    beside = Path(sys.executable).parent / "cmake"
    return shutil.which("cmake") or (str(beside) if beside.is_file() else None)


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile jobs (default: every core)")
    parser.add_argument("--force", action="store_true", help="build again even if the cache has the binary")
    args = parser.parse_args()
    found = None if args.force else server_path()
    if found is None:
        if _cmake() is None:
            print(f"{NAME}: cmake is not installed; install it (apt-get install cmake, or pip install cmake) and run "
                  "this again", file=sys.stderr)  # fmt: skip
            return 2
        found = build(args.jobs)
    else:
        print(f"llama-server is built already ({found}); --force builds it again", file=sys.stderr)
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
