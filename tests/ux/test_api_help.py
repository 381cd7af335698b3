"""The library API as help() and inspect show it: real defaults, parameter docs, no internal markers.

Scenario: ``inspect.signature`` and ``pydoc`` over ``CacheController`` and
over every callable named in a public module's ``__all__``.
Expected: no signature shows an ``<object object at 0x...>`` (a private
marker) as a default or annotation; ``CacheController`` takes at most ten
parameters, its options as one ``ControllerSettings`` (whose help documents
each), and help() documents every parameter.
Why it matters: a newcomer reads the API from help(), not from the source.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import pydoc
from typing import Any

import pytest

from hicache_contracts import ContractViolation, HiCacheStorageConfig
from hicache_contracts.host_pool import HostPagePool
from hicache_reference import CacheController, ControllerSettings
from hicache_reference.backends import MemoryBackend


def test_the_controller_takes_its_options_as_one_settings_object() -> None:
    signature = inspect.signature(CacheController)
    assert "object at 0x" not in str(signature)
    assert len(signature.parameters) <= 10
    assert not set(signature.parameters) & set(ControllerSettings.model_fields)
    assert signature.parameters["settings"].default is None


def test_help_documents_every_parameter_of_the_controller_and_every_option() -> None:
    text = pydoc.render_doc(CacheController, renderer=pydoc.plaintext)  # type: ignore[attr-defined]  # not in typeshed
    assert "object at 0x" not in text
    for name in inspect.signature(CacheController).parameters:
        assert f"    {name}: " in text, name
    options = " ".join(pydoc.render_doc(ControllerSettings, renderer=pydoc.plaintext).split())  # type: ignore[attr-defined]
    assert "Pages per storage call (CTL-2)." in options


@pytest.mark.clause("CTL-2")
def test_settings_of_another_type_are_refused_naming_the_parameter() -> None:
    pool = HostPagePool(8, 4, 1, 1, 2, kind="mha", pin_memory=False)
    backend = MemoryBackend(HiCacheStorageConfig.single_rank(), {})
    with pytest.raises(ContractViolation, match=r"^CacheController.settings: must be a ControllerSettings"):
        CacheController(backend, pool, settings={"batch_size": 128}, start=False)  # type: ignore[arg-type]
    controller = CacheController(backend, pool, start=False)
    assert controller.settings == ControllerSettings()


def test_no_public_signature_shows_an_internal_marker() -> None:
    shown = []
    for package in ("hicache_spec", "hicache_contracts", "hicache_reference"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if any(part.startswith("_") for part in info.name.split(".")) or info.name.endswith("pytest_plugin"):
                continue
            try:
                module = importlib.import_module(info.name)
            except ImportError:  # an optional dependency (tests/contracts/test_optional_extras.py)
                continue
            for name in getattr(module, "__all__", ()):
                value = getattr(module, name, None)
                members: list[Any] = [value]
                if inspect.isclass(value):
                    members += [item for key, item in vars(value).items() if callable(item) and not key.startswith("_")]
                for member in members:
                    try:
                        signature = str(inspect.signature(member))
                    except (TypeError, ValueError):
                        continue
                    if "object at 0x" in signature:
                        shown.append(f"{info.name}.{name}: {signature[:120]}")
    assert shown == []
