"""A plugin package as a registry serves it, made and installed by the tests: a wheel of one module that declares
an environment under the entry-point group `rawreact.environments`, installed with pip into a folder of its own
(put it on PYTHONPATH to have it installed)."""

import subprocess
import sys
import zipfile
from pathlib import Path


def install_plugin(folder: Path, module_text: str, version: str = "1.2.0", data: dict[str, str] | None = None) -> Path:
    """The folder pip installed the `glossary-plugin` package into: its module `glossary_plugin` (`module_text`),
    whose `make` is the environment `glossary`, and the files `data` (by their path in the package's folder)."""
    wheel = folder / f"glossary_plugin-{version}-py3-none-any.whl"
    info = f"glossary_plugin-{version}.dist-info"
    files = {
        "glossary_plugin/__init__.py": module_text,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: glossary-plugin\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[rawreact.environments]\nglossary = glossary_plugin:make\n",
    } | {f"glossary_plugin/{name}": text for name, text in (data or {}).items()}
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n")
    installed = folder / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(installed)]
    done = subprocess.run([*pip, str(wheel)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return installed
