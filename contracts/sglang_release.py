"""Which SGLang release the suites use, and how a pinned release's wheel is obtained.

A pinned release (``hicache_spec.releases.SGLANG_RELEASES``) is used either
because it is installed (``import sglang`` finds it) or from its wheel:
``fetch_release(V)`` runs ``pip download --no-deps sglang==V`` and unpacks the
``sglang`` package into a cache outside the repository
(``$HICACHE_SGLANG_CACHE``, else ``~/.cache/hicache-spec/sglang/V``);
``use_release(V)`` puts that folder first on ``sys.path``. Nothing is
installed as ``sglang``. One process holds one release: once ``sglang`` is
imported, asking for another is a ``ReleaseError``.

SGLang's modules import third-party packages of their own (the ``sglang``
extra of this project installs them); a failure to import names the missing
module in one line.
"""

from __future__ import annotations

import importlib
import os
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Optional

from hicache_spec.releases import SGLANG_RELEASES, UnknownReleaseError, check_release

__all__ = [
    "CACHE_ENV",
    "HICACHE_MODULES",
    "ReleaseError",
    "active_release",
    "cache_root",
    "describe_choice",
    "describe_engine",
    "fetch_release",
    "installed_release",
    "release_dir",
    "release_of",
    "resolve_release",
    "storage_module",
    "use_release",
]

CACHE_ENV = "HICACHE_SGLANG_CACHE"
"""Environment variable naming the folder that holds unpacked releases."""

STORAGE_MODULE = "sglang.srt.mem_cache.hicache_storage"
"""Where SGLang defines the storage interface's classes."""

HICACHE_MODULES: tuple[str, ...] = (
    STORAGE_MODULE,
    "sglang.srt.managers.cache_controller",
    "sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller",
    "sglang.srt.mem_cache.storage.backend_factory",
    "sglang.srt.mem_cache.storage.sim_storage",
    "sglang.srt.mem_cache.storage.shm.hicache_shm",
    "sglang.srt.mem_cache.utils",
)
"""SGLang's HiCache modules the release tier imports (HiCacheFile lives in the storage module)."""


class ReleaseError(RuntimeError):
    """A release cannot be used: not pinned, not obtainable, not importable, or another one is loaded."""


def cache_root() -> Path:
    """Return the folder that holds one unpacked release per subfolder."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "hicache-spec" / "sglang"


def release_dir(version: str) -> Path:
    """Return the folder that holds release ``version``'s ``sglang`` package once unpacked."""
    return cache_root() / check_release(version)


def _unpacked(folder: Path) -> bool:
    return (folder / "sglang" / "srt" / "mem_cache" / "hicache_storage.py").is_file()


def fetch_release(version: str, *, quiet: bool = True) -> Path:
    """Return release ``version``'s unpacked folder, downloading and unpacking its wheel if missing.

    The wheel comes from the package index through pip (``--no-deps``); it is
    unpacked into a temporary folder and renamed into place, so an
    interrupted fetch leaves nothing half-written. Raises ReleaseError with
    pip's reason when the wheel cannot be had.
    """
    try:
        target = release_dir(version)
    except UnknownReleaseError as error:
        raise ReleaseError(str(error)) from None
    if _unpacked(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".sglang-{version}-", dir=target.parent) as work:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
            f"sglang=={version}",
            "-d",
            work,
        ]
        if quiet:
            command.append("--quiet")
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ReleaseError(f"sglang {version}: pip download failed: {error}") from None
        wheels = sorted(Path(work).glob("sglang-*.whl"))
        if done.returncode != 0 or not wheels:
            reason = (done.stderr or done.stdout).strip().splitlines()
            raise ReleaseError(f"sglang {version}: pip download failed: {reason[-1] if reason else done.returncode}")
        staging = Path(work) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [name for name in wheel.namelist() if name.startswith("sglang/")]
            wheel.extractall(staging, members)
        # The wheel's digest, for the provenance of results bundles (reporting/bundle.py WHEEL_DIGEST_FILE).
        digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
        (staging / "wheel.sha256").write_text(f"{digest}  {wheels[0].name}\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return target


def _version_in(folder: Path) -> Optional[str]:
    """Read ``sglang/_version.py`` under ``folder`` without importing it."""
    path = folder / "sglang" / "_version.py"
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("__version__") and "=" in line:
            return line.rsplit("=", 1)[1].strip().strip("'\"")
    return None


def installed_release() -> Optional[str]:
    """Return the version of the ``sglang`` that ``import sglang`` would find now, or None."""
    loaded = sys.modules.get("sglang")
    if loaded is not None:
        return release_of(loaded) or "unknown"
    for entry in sys.path:
        folder = Path(entry or ".")
        if (folder / "sglang" / "__init__.py").is_file():
            found = _version_in(folder)
            if found is not None:
                return found
            try:
                from importlib.metadata import version

                return version("sglang")
            except Exception:
                return "unknown"
    return None


def release_of(module: Any) -> Optional[str]:
    """Return the release a loaded SGLang module (the package or any submodule) belongs to, or None.

    A stand-in module names its release with ``__sglang_version__``.
    """
    for candidate in (module, sys.modules.get(STORAGE_MODULE)):
        stated = getattr(candidate, "__sglang_version__", None)
        if stated is not None:
            return str(stated)
    file = getattr(sys.modules.get("sglang"), "__file__", None)
    if file:
        return _version_in(Path(file).parent.parent)
    return None


def active_release() -> Optional[str]:
    """Return the release of the ``sglang`` already imported in this process, or None."""
    loaded = sys.modules.get("sglang")
    return None if loaded is None else release_of(loaded)


def use_release(version: Optional[str] = None, *, fetch: bool = True) -> str:
    """Make release ``version`` the one ``import sglang`` finds; return the version used.

    ``None`` means: the installed one if it is pinned, else nothing (ReleaseError).
    An installed release that matches is used as is; otherwise the cached
    wheel is put first on ``sys.path`` (fetched first when ``fetch``).
    """
    installed = installed_release()
    if version is None:
        if installed is None:
            raise ReleaseError(
                f"no SGLang is importable; name a pinned release with --sglang-version ({', '.join(SGLANG_RELEASES)})"
            )
        version = installed
    try:
        check_release(version)
    except UnknownReleaseError as error:
        raise ReleaseError(str(error)) from None
    active = active_release()
    if active is not None:
        if active != version:
            raise ReleaseError(
                f"sglang {active} is already imported in this process; sglang {version} needs a process of its own"
            )
        return version
    if installed == version:
        return version
    folder = fetch_release(version) if fetch else release_dir(version)
    if not _unpacked(folder):
        raise ReleaseError(f"sglang {version} is not unpacked under {folder}")
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    return version


def storage_module(version: Optional[str] = None, *, fetch: bool = True) -> Any:
    """Return ``sglang.srt.mem_cache.hicache_storage`` of ``version`` (see ``use_release``).

    Raises ReleaseError naming the missing module when SGLang's own imports fail.
    """
    used = use_release(version, fetch=fetch)
    try:
        return importlib.import_module(STORAGE_MODULE)
    except ImportError as error:
        missing = getattr(error, "name", None) or str(error)
        raise ReleaseError(
            f"sglang {used}: importing {STORAGE_MODULE} needs the Python package {missing!r} "
            "(install this project's 'sglang' extra: pip install -e '.[sglang]')"
        ) from None
    except Exception as error:  # SGLang's own import-time code failed
        raise ReleaseError(
            f"sglang {used}: importing {STORAGE_MODULE} failed: {type(error).__name__}: {error}"
        ) from None


def resolve_release(choice: Optional[str] = None) -> Optional[str]:
    """Return the release whose objects a suite hands to backends, loading it; None for the contract models.

    ``choice`` is None (automatic: the installed SGLang when there is one,
    which must then be pinned and importable), ``"none"`` (the contract
    models, even when SGLang is installed) or a pinned version (installed,
    or from its cached wheel). Raises ReleaseError with one line naming the
    incompatibility.
    """
    if choice == "none":
        return None
    if choice is None and installed_release() is None:
        return None
    module = storage_module(choice)
    return release_of(module) or choice


def describe_choice(release: Optional[str]) -> str:
    """Return the report line that says which objects the backend received."""
    if release is None:
        return "SGLang objects: none (SGLang is not importable, or --sglang-version none): the backend receives the contract models"
    return (
        f"SGLang objects: release {release} (its HiCacheStorageConfig, HiCacheStorageExtraInfo, PoolTransfer, PoolName)"
    )


STAND_IN_ENGINE = "engine: stand-in; install a pinned SGLang release for engine-driven verdicts"
"""The report line of a run without a pinned release: the suite's own stand-in plays the engine."""


def describe_engine(release: Optional[str], how: str = "") -> str:
    """Return the report line that says which engine built, fed and called the backend, and in which tier.

    ``how`` says how the release drove the backend (``BackendFactory.engine``); empty: the probe tier
    over a backend the suite built, handing it the release's objects.
    """
    if release is None:
        return STAND_IN_ENGINE
    return (
        f"engine: SGLang {release}, {how or 'probe tier (the suite builds the backend and sends the release objects)'}"
    )
