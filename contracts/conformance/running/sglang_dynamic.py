"""A vendor's dynamic backend, built by a pinned SGLang release exactly as SGLang builds it.

``hicache-conform run --sglang-config '<JSON>'`` takes the object a user passes to
``--hicache-storage-backend dynamic --hicache-storage-backend-extra-config`` (``backend_name``,
``module_path``, ``class_name``, optionally ``interface_v1``, and the backend's own keys).
``dynamic_factory`` returns a ``BackendFactory`` whose every instance is made by the loaded
release's own code:

- the storage config is the one the release's controller generates
  (``HiCacheController._generate_storage_config``) for the instance's coordinates: the TP and PP
  ranks through the release's parallel context, the CP ranks as the controller derives them, the
  device pool's class deciding ``is_mla_model``, the host pool's layout ``is_page_first_layout``,
  the extra config as the controller hands it on (``tp_lcm_size`` taken out);
- the backend comes out of ``StorageBackendFactory.create_backend("dynamic", config, None)``,
  which imports the class, requires it to subclass the release's ``HiCacheStorage`` and calls
  ``cls(storage_config, {})``; the suite calls it on the main thread, as the engine does.

Which interface SGLang drives follows the release's controller
(``attach_storage_backend``): a dynamic backend with ``interface_v1`` through
``batch_get_v1``/``batch_set_v1``, without it through the legacy ``batch_get``/``batch_set``.
Without ``interface_v1`` the v1 level is not asked (whatever the class implements) and ``legacy``
is required; the report's engine line names the path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from typing import Any, Iterator, Mapping, Optional

from hicache_contracts.conformance.session.loading import LOADING_KEYS, BackendFactory, import_backend_module
from hicache_contracts.errors import bad_value

__all__ = ["LEGACY_PATH", "REQUIRED_KEYS", "dynamic_factory", "driven_path"]

REQUIRED_KEYS: tuple[str, ...] = ("backend_name", "module_path", "class_name")
"""What ``StorageBackendFactory._create_dynamic_backend`` requires of the extra config."""

LEGACY_PATH = (
    "not asked: SGLang drives a dynamic backend configured without interface_v1 through batch_get/batch_set "
    "(managers/cache_controller.py attach_storage_backend takes the zero-copy v1 path for 'dynamic' only "
    "when extra_config['interface_v1'] is set)"
)
"""Why v1 is not claimed for a dynamic backend without ``interface_v1``."""

_CONTROLLER_FIELDS = frozenset(
    (
        "tp_rank",
        "tp_size",
        "pp_rank",
        "pp_size",
        "attn_cp_rank",
        "attn_cp_size",
        "is_mla_model",
        "is_page_first_layout",
        "model_name",
        "extra_config",
    )
)
"""The config fields the controller is made to generate from the instance's coordinates."""


def driven_path(config: Mapping[str, Any]) -> str:
    """Return how SGLang drives a dynamic backend with this extra config: the methods it calls."""
    if bool(config.get("interface_v1", 0)):
        return "batch_get_v1/batch_set_v1 (interface_v1)"
    return "batch_get/batch_set (legacy: no interface_v1)"


def dynamic_factory(config: Mapping[str, Any], *, field_name: str = "--sglang-config") -> BackendFactory:
    """Return a factory that builds the dynamic backend ``config`` names through the loaded release.

    Raises ValueError naming the field when no release is loaded, a required key is missing, or
    the release's loader refuses the class (not importable, not a ``HiCacheStorage`` subclass).
    """
    if not isinstance(config, Mapping):
        raise bad_value(field_name, "must be an object (the dynamic backend's extra config)", config)
    try:
        storage = importlib.import_module("sglang.srt.mem_cache.storage")
    except ImportError:
        raise bad_value(
            field_name,
            "needs a pinned SGLang release to build the backend (name one with --sglang-version)",
            dict(config),
        ) from None
    for key in REQUIRED_KEYS:
        if not isinstance(config.get(key), str) or not config.get(key):
            raise bad_value(
                f"{field_name}.{key}", "must be given: SGLang's dynamic backend loader requires it", config.get(key)
            )
    module_path, class_name, backend_name = config["module_path"], config["class_name"], config["backend_name"]
    import_backend_module(module_path, f"{module_path}:{class_name}", field_name=f"{field_name}.module_path")
    factory_class = storage.StorageBackendFactory
    try:
        backend_class = factory_class._load_backend_class(module_path, class_name, backend_name)
    except Exception as error:
        raise bad_value(
            f"{field_name}.class_name",
            f"must name a class SGLang's loader accepts ({type(error).__name__}: {error})",
            class_name,
        ) from None
    extra = dict(config)

    def build(storage_config: Any, kwargs: Any) -> Any:
        given = dict(storage_config.extra_config or {})
        for key in LOADING_KEYS:  # SGLang's extra config always names the backend, whatever else a check varies
            if key in extra:
                given.setdefault(key, extra[key])
        storage_config = dataclasses.replace(storage_config, extra_config=given)
        generated = controller_storage_config(storage_config)
        return factory_class.create_backend("dynamic", generated, None)

    build.__qualname__ = class_name
    build.__module__ = module_path
    build.backend_class = backend_class  # type: ignore[attr-defined]
    not_asked = {} if bool(extra.get("interface_v1", 0)) else {"v1": LEGACY_PATH}
    release = _release()
    engine = (
        f"probe tier; its StorageBackendFactory built the backend from the dynamic-backend config "
        f"(backend_name {backend_name!r}) on the main thread; SGLang {release} drives it through {driven_path(extra)}"
    )
    return BackendFactory(build, extra, f"{module_path}:{class_name}", not_asked=not_asked, engine=engine)


def _release() -> str:
    from hicache_contracts.sglang_release import active_release

    return active_release() or "installed"


class _ControllerView:
    """What ``HiCacheController._generate_storage_config`` reads of a controller, for one instance's coordinates."""

    def __init__(self, config: Any, device_class: type, host_pool: Any) -> None:
        self.mem_pool_device: Any = object.__new__(device_class)  # only its class is read
        self.mem_pool_host = host_pool
        self.storage_host_pool = host_pool
        self.enable_storage_metrics = False
        self.page_size = 1
        self.attn_cp_group = None
        self._cp = (config.attn_cp_rank, config.attn_cp_size)

    def get_attn_cp_rank_and_size(self) -> tuple[int, int]:
        return self._cp


class _HostView:
    """The host pool as the config generator reads it: its layout and its storage format tag."""

    def __init__(self, page_first: bool) -> None:
        self.layout = "page_first" if page_first else "layer_first"
        self.storage_format_tag = None


@contextlib.contextmanager
def _coordinates(config: Any) -> Iterator[None]:
    """The release's parallel context at the instance's TP and PP ranks, DP attention off."""
    runtime = importlib.import_module("sglang.srt.runtime_context")
    controller: Any = importlib.import_module("sglang.srt.managers.cache_controller")
    parallel = runtime.get_parallel()
    fields = getattr(runtime, "_PARALLEL_FIELDS", None) or runtime._parallel_fields()
    wanted = {
        "tp_rank": config.tp_rank,
        "tp_size": config.tp_size,
        "pp_rank": config.pp_rank,
        "pp_size": config.pp_size,
        "attn_dcp_rank": getattr(config, "dcp_rank", 0) or 0,
        "attn_dcp_size": getattr(config, "dcp_size", 1) or 1,
    }
    dp_attention = controller.is_dp_attention_enabled
    controller.is_dp_attention_enabled = lambda: False
    try:
        with parallel.override(**{name: value for name, value in wanted.items() if name in fields}):
            yield
    finally:
        controller.is_dp_attention_enabled = dp_attention


def controller_storage_config(config: Any) -> Any:
    """Return the storage config the release's controller generates for ``config``'s coordinates.

    ``config`` is the release's ``HiCacheStorageConfig`` the suite would have handed over; the
    fields the controller does not derive from the coordinates it is given (``dp_rank``, the DCP
    fields of a release that has them) are carried over from it.
    """
    controller = importlib.import_module("sglang.srt.managers.cache_controller")
    memory_pool = importlib.import_module("sglang.srt.mem_cache.memory_pool")
    device_class = memory_pool.MLATokenToKVPool if config.is_mla_model else memory_pool.MHATokenToKVPool
    view = _ControllerView(config, device_class, _HostView(bool(config.is_page_first_layout)))
    extra: Optional[dict[str, Any]] = None if config.extra_config is None else dict(config.extra_config)
    with _coordinates(config):
        generated = controller.HiCacheController._generate_storage_config(view, config.model_name, extra)
    carried = {
        field.name: getattr(config, field.name)
        for field in dataclasses.fields(config)
        if field.name not in _CONTROLLER_FIELDS and getattr(config, field.name) != getattr(generated, field.name)
    }
    return dataclasses.replace(generated, **carried) if carried else generated
