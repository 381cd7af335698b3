"""Key namespacing shared by the reference backends (NS family): the namespace and the object name.

A page key names a token prefix only (KEY-3); the backend adds who the page
belongs to. The namespace holds the model and the pipeline, context and tensor
parallel coordinates — except that replicated KV (``is_mla_model``) drops the
tensor rank so that every TP rank reads what rank 0 wrote (NS-5); Mamba state,
sharded by rank even then, keeps it. The same
configuration always yields the same namespace, across restarts (NS-7).

``ObjectName`` is the one home of the naming rule: every backend names a
stored page from one (NS-6); see docs/backends.md, "Where pages are".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from hicache_spec import KV

__all__ = [
    "RANK_SHARDED_POOLS",
    "ObjectName",
    "SharedNamespace",
    "format_tag",
    "namespace_for",
    "plain_keys",
    "storage_name",
    "with_format",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_ESCAPED_RUN = re.compile(r"(?:%[0-9a-f]{2})+")


def _safe(text: str) -> str:
    """Make ``text`` usable as one path segment or key part, keeping it readable and injective.

    Every character outside ``[A-Za-z0-9._-]`` (``%`` included) becomes ``%XX`` per byte of its UTF-8
    encoding, so two different texts never share an escaped form. Safe text, such as every
    hex page key, is returned as it is.
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(lambda match: "".join(f"%{byte:02x}" for byte in match.group().encode()), text)


def _unsafe(text: str) -> str:
    """Invert ``_safe``; raise ValueError for text ``_safe`` never gives."""
    if "%" not in text:
        if _UNSAFE.search(text) is not None:
            raise ValueError(f"not an escaped name part: {text!r}")
        return text
    try:
        original = _ESCAPED_RUN.sub(lambda match: bytes.fromhex(match.group().replace("%", "")).decode(), text)
    except UnicodeDecodeError:
        original = None
    if original is None or _safe(original) != text:
        raise ValueError(f"not an escaped name part: {text!r}")
    return original


def plain_keys(joined: str) -> bool:
    """Whether keys whose concatenation is ``joined`` are all ASCII letters and digits, which ``_safe`` keeps.

    Such a key's name is its pool's prefix (the name of the empty key) followed by the key itself.
    """
    # bytes.isalnum is a table lookup per byte; str.isalnum a Unicode query per character.
    return joined.isascii() and joined.encode("ascii").isalnum()


@dataclass(frozen=True, slots=True)
class ObjectName:
    """The name of one stored page: whose (``namespace``), which pool, which key (NS-6).

    ``to_str()`` is ``<namespace>/<pool>/<key>``, pool and key escaped so that no
    text reaches into another part; ``parse()`` inverts it. The file backend
    renders it as a relative path, Redis as a hash key and field (their modules).
    """

    namespace: str
    """As ``namespace_for`` gives it: already escaped, parts joined by '/'."""
    pool: str
    """The pool's plain value, such as ``"kv"``."""
    key: str
    """The page key as the engine gave it."""

    def __post_init__(self) -> None:
        # A rank-sharded pool of a replicated-KV instance lies in its TP rank's own namespace (CTL-8, NS-1).
        if isinstance(self.namespace, SharedNamespace) and str(self.pool) in RANK_SHARDED_POOLS:
            object.__setattr__(self, "namespace", self.namespace.per_rank)

    @property
    def escaped_pool(self) -> str:
        """The pool as it appears in a name."""
        return _safe(self.pool)

    @property
    def escaped_key(self) -> str:
        """The key as it appears in a name."""
        return _safe(self.key)

    def to_str(self, component: Optional[Callable[[str], str]] = None) -> str:
        """Return ``<namespace>/<pool>/<key>``; ``component`` maps each escaped pool and key part further."""
        pool, key = _safe(self.pool), _safe(self.key)
        if component is not None:
            pool, key = component(pool), component(key)
        return f"{self.namespace}/{pool}/{key}"

    @classmethod
    def parse(cls, text: str) -> ObjectName:
        """Return the name whose ``to_str()`` is ``text``; raise ValueError for text no name gives."""
        head, separator, key = text.rpartition("/")
        namespace, middle, pool = head.rpartition("/")
        if not separator or not middle or not namespace:
            raise ValueError(f"not an object name (<namespace>/<pool>/<key>): {text!r}")
        return cls(namespace, _unsafe(pool), _unsafe(key))


RANK_SHARDED_POOLS = frozenset({"mamba"})
"""Pools whose pages are sharded by TP rank even where KV is replicated: Mamba state, which every rank writes
(SGLang 0.5.23 ``HybridCacheController.should_backup``, HiCacheFile ``tp_config_suffix``)."""


class SharedNamespace(str):
    """The namespace of a replicated-KV instance (``tp-shared``), knowing the namespace of its own TP rank
    (``per_rank``), where its rank-sharded pools lie (``RANK_SHARDED_POOLS``)."""

    per_rank: str

    def __new__(cls, shared: str, per_rank: str) -> SharedNamespace:
        made = super().__new__(cls, shared)
        made.per_rank = per_rank
        return made

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]
        return (str(self), self.per_rank)  # copies and pickles keep the rank's namespace


def namespace_for(config: Any) -> str:
    """Return the namespace of a backend instance built from ``config`` (any object with SGLang's config fields).

    NS-1..NS-4: model, PP, CP and TP coordinates are all part of it.
    NS-5: with replicated KV the TP coordinate is ``tp-shared``, one per decode-context-parallel shard when
    there are several (``tp-shared-dcp1of2``: each DCP rank holds its own part of a page, as SGLang 0.5.23's
    HiCacheFile keeps a ``dcp`` suffix); that namespace is a ``SharedNamespace`` whose rank-sharded pools (Mamba
    state) lie in the rank's own namespace all the same (``ObjectName``).
    """
    model = _safe(str(getattr(config, "model_name", None) or "default-model"))
    pp = f"pp{getattr(config, 'pp_rank', 0)}of{getattr(config, 'pp_size', 1)}"
    cp = f"cp{getattr(config, 'attn_cp_rank', 0)}of{getattr(config, 'attn_cp_size', 1)}"
    dcp_size = getattr(config, "dcp_size", 1)
    own = f"{model}/{pp}/{cp}/tp{getattr(config, 'tp_rank', 0)}of{getattr(config, 'tp_size', 1)}"
    if getattr(config, "is_mla_model", False):
        tp = "tp-shared" if dcp_size == 1 else f"tp-shared-dcp{getattr(config, 'dcp_rank', 0)}of{dcp_size}"
        return SharedNamespace(f"{model}/{pp}/{cp}/{tp}", own)
    return own


def format_tag(pool: Any, dtype: Any, page_size: int, element_count: int) -> str:
    """Return the namespace part naming how a KV pool's pages look as bytes (NS-9): layout, dtype, geometry.

    ``fmt-<layout>.<dtype>.p<page size>.e<elements per page>``, followed by the
    pool's own ``storage_format_tag`` when it has one (SGLang's unified page
    envelope). Pools of one layout, dtype and geometry get the same tag; a pool
    of another layout, dtype or geometry another one, so its reader misses
    instead of loading bytes it would misread (two layouts that happen to
    order a flat page alike are kept apart too: a miss, never a misread).
    """
    layout = getattr(pool, "layout", None) or "flat"
    dtype_name = str(dtype).removeprefix("torch.")
    tag = f"fmt-{layout}.{dtype_name}.p{page_size}.e{element_count}"
    own = getattr(pool, "storage_format_tag", None)
    if isinstance(own, str) and own:
        tag += f".{own}"
    return _safe(tag)


def with_format(namespace: str, tag: str) -> str:
    """Return ``namespace`` with the format part ``tag`` as its last part (NS-9)."""
    if isinstance(namespace, SharedNamespace):
        return SharedNamespace(f"{namespace}/{tag}", f"{namespace.per_rank}/{tag}")
    return f"{namespace}/{tag}"


def storage_name(namespace: str, key: str, pool: str = KV) -> str:
    """Return the stored object's name for ``key`` in ``pool`` under ``namespace`` (NS-6: one scheme for every call)."""
    return ObjectName(namespace, str(pool), key).to_str()
