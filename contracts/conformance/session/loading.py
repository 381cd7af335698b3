"""Loading a vendor's backend the way SGLang loads a dynamic backend.

SGLang's ``--hicache-storage-backend dynamic`` reads ``module_path`` and
``class_name`` from the extra config (``--hicache-storage-backend-extra-config``),
imports the class and builds it as ``cls(storage_config, kwargs)``, where
``storage_config.extra_config`` is the whole extra config (the loading keys
included) and ``kwargs`` is a dict of engine keyword arguments, empty in
practice. The host pool arrives later, through ``register_mem_pool_host``.

``BackendFactory`` does exactly that for every instance the suite builds.
The extra config is given as JSON text, or ``@path`` to a ``.json``,
``.toml``, ``.yaml`` or ``.yml`` file.

A backend module is looked up on the import path first and then, as pytest
does with its rootdir, in the working directory (a note on stderr says
so); a module found in neither is refused with an error that names the
module, the folders searched and the fix.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from hicache_contracts.errors import bad_value

__all__ = ["BackendFactory", "import_backend_module", "load_object", "parse_extra_config", "resolve_factory"]

LOADING_KEYS: tuple[str, ...] = ("backend_name", "module_path", "class_name", "interface_v1")
"""Keys SGLang's dynamic loading reads from the extra config and still passes to the backend."""


def parse_extra_config(text: Optional[str], *, field_name: str = "--extra-config") -> Optional[dict[str, Any]]:
    """Return the extra config that ``text`` describes: JSON, or ``@path`` to a JSON, TOML or YAML file.

    None or blank text gives None. Anything but an object (a dict), and
    hostile input (too large, too deep, a YAML alias bomb, NaN) is refused
    with a ValueError naming ``field_name`` (``options.load_config``).
    """
    from hicache_contracts.conformance.session.options import load_config

    return load_config(text, field_name=field_name)


def load_object(spec: str, *, field_name: str = "--backend") -> Any:
    """Import and return the object named by ``spec``: ``package.module:Name`` or ``package.module.Name``."""
    if not isinstance(spec, str) or not spec.strip():
        raise bad_value(field_name, "must be 'module:Class'", spec)
    spec = spec.strip()
    if ":" in spec:
        module_name, _, attribute = spec.partition(":")
    else:
        module_name, _, attribute = spec.rpartition(".")
    if not module_name or not attribute:
        raise bad_value(field_name, "must be 'module:Class'", spec)
    module = import_backend_module(module_name, spec, field_name=field_name)
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise bad_value(field_name, f"module {module_name!r} must define {attribute!r}", spec) from None
    return target


def _is_missing(error: ModuleNotFoundError, module_name: str) -> bool:
    """Whether ``error`` says ``module_name`` itself (or a package above it) is missing, not one of its imports."""
    missing = error.name or ""
    return bool(missing) and (module_name == missing or module_name.startswith(missing + "."))


def import_backend_module(module_name: str, spec: str, *, field_name: str = "--backend") -> Any:
    """Import ``module_name`` from the import path, else from the working directory; raise ValueError saying why not.

    The working directory is tried the way pytest tries its rootdir: it is
    put at the front of ``sys.path`` (and stays there, as the backend may
    import its siblings later), and a note on stderr says so.
    """
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if not _is_missing(error, module_name):
            raise _import_error(field_name, module_name, error, spec) from None
    except Exception as error:  # a module that exists but fails while importing
        raise _import_error(field_name, module_name, error, spec) from None
    working_directory = os.getcwd()
    if working_directory not in [os.path.abspath(entry or ".") for entry in sys.path]:
        sys.path.insert(0, working_directory)
        importlib.invalidate_caches()
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            sys.path.remove(working_directory)
            if not _is_missing(error, module_name):
                raise _import_error(field_name, module_name, error, spec) from None
        except Exception as error:
            raise _import_error(field_name, module_name, error, spec) from None
        else:
            print(
                f"hicache-conform: imported {module_name!r} from the working directory {working_directory} "
                "(it is not on the import path)",
                file=sys.stderr,
            )
            return module
    top = module_name.partition(".")[0]
    raise bad_value(
        field_name,
        f"module {module_name!r} must be importable; it is neither on the import path nor in the working "
        f"directory {working_directory} (no {top}/ or {top}.py there); run from the folder that holds it, "
        f"add that folder to PYTHONPATH, or install your package (pip install -e .)",
        spec,
    )


def _import_error(field_name: str, module_name: str, error: BaseException, spec: str) -> ValueError:
    if isinstance(error, ModuleNotFoundError) and error.name:
        rule = (
            f"module {module_name!r} must import without error; it needs {error.name!r}, which is not "
            f"installed (install it into this environment)"
        )
    else:
        rule = f"module {module_name!r} must import without error ({type(error).__name__}: {error})"
    return bad_value(field_name, rule, spec)


@dataclass(frozen=True)
class BackendFactory:
    """Builds backend instances as SGLang does: ``target(storage_config, kwargs)``.

    ``target`` is the backend class (or any callable with that signature);
    ``extra_config`` becomes ``storage_config.extra_config`` of every
    instance; ``kwargs`` is the second constructor argument (SGLang passes
    an empty dict).
    """

    target: Callable[..., Any]
    """The backend class, or a callable taking ``(storage_config, kwargs)``."""
    extra_config: Optional[Mapping[str, Any]] = None
    """The vendor's extra config, as SGLang's ``--hicache-storage-backend-extra-config`` would hold it."""
    name: str = ""
    """How the report names the backend (``module:Class`` by default)."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """The second constructor argument; empty, as SGLang passes it."""
    not_asked: Mapping[str, str] = field(default_factory=dict)
    """Levels the engine never drives this backend in, each with why: not claimed unless declared."""
    backdoor: Optional[Any] = None
    """Optional hooks to the stored objects (``hicache_contracts.conformance.session.backdoor``), for the checks that need them."""
    engine: str = ""
    """How a pinned SGLang release builds and drives this backend, for the report's engine line (empty: the suite builds it)."""

    def __post_init__(self) -> None:
        if not callable(self.target):
            raise bad_value("BackendFactory.target", "must be a backend class or callable", self.target)
        if self.extra_config is not None and not isinstance(self.extra_config, Mapping):
            raise bad_value("BackendFactory.extra_config", "must be a dict or None", self.extra_config)
        if not isinstance(self.not_asked, Mapping) or not all(
            isinstance(level, str) and isinstance(why, str) for level, why in self.not_asked.items()
        ):
            raise bad_value("BackendFactory.not_asked", "must map level names to reasons", self.not_asked)
        if self.backdoor is not None and not all(
            callable(getattr(self.backdoor, hook, None)) for hook in ("plant", "peek", "remove")
        ):
            raise bad_value("BackendFactory.backdoor", "must have plant, peek and remove methods", self.backdoor)
        if not self.name:
            object.__setattr__(self, "name", _describe_target(self.target))

    @property
    def backend_class(self) -> Optional[type]:
        """The backend class when ``target`` is one, else None."""
        return self.target if isinstance(self.target, type) else None

    def build(self, storage_config: Any) -> Any:
        """Return a new backend instance for ``storage_config`` (already in the form the backend receives)."""
        return self.target(storage_config, dict(self.kwargs))


def _describe_target(target: Any) -> str:
    module = getattr(target, "__module__", None) or "?"
    name = getattr(target, "__qualname__", None) or type(target).__name__
    return f"{module}:{name}"


def resolve_factory(
    backend: Any = None, extra_config: Optional[Mapping[str, Any]] = None, *, name: str = ""
) -> BackendFactory:
    """Return a ``BackendFactory`` from what a vendor gave.

    ``backend`` is a ``BackendFactory``, a class or callable, a
    ``"module:Class"`` string, or None — then ``extra_config`` must hold
    ``module_path`` and ``class_name``, as for SGLang's dynamic backend.
    """
    if isinstance(backend, BackendFactory):
        return backend
    if backend is None:
        config = dict(extra_config or {})
        module_path, class_name = config.get("module_path"), config.get("class_name")
        if not module_path and not class_name:
            raise bad_value(
                "--backend", "must be given, or the extra config must hold module_path and class_name", None
            )
        if not module_path or not class_name:
            missing, present = ("module_path", "class_name") if not module_path else ("class_name", "module_path")
            raise bad_value(
                f"extra_config.{missing}",
                f"must be given with {present} to name the backend (or give --backend)",
                config.get(missing),
            )
        target = load_object(f"{module_path}:{class_name}", field_name="extra_config.module_path/class_name")
        return BackendFactory(target, extra_config, name or f"{module_path}:{class_name}")
    if isinstance(backend, str):
        return BackendFactory(load_object(backend), extra_config, name or backend.strip())
    return BackendFactory(backend, extra_config, name)
