"""Key namespacing shared by the reference backends (NS family).

A page key names a token prefix only (KEY-3); the backend adds who the page
belongs to. The namespace holds the model and the pipeline, context and tensor
parallel coordinates — except that replicated KV (``is_mla_model``) drops the
tensor rank so that every TP rank reads what rank 0 wrote (NS-5). The same
configuration always yields the same namespace, across restarts (NS-7).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["namespace_for", "storage_name"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _safe(text: str) -> str:
    """Make ``text`` usable as one path segment or key part, keeping it readable and injective.

    Every character outside ``[A-Za-z0-9._-]`` (``%`` included) becomes ``%XX`` per byte of its UTF-8
    encoding, so two different texts never share an escaped form. Safe text, such as every
    hex page key, is returned as it is.
    """
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(lambda match: "".join(f"%{byte:02x}" for byte in match.group().encode()), text)


def namespace_for(config: Any) -> str:
    """Return the namespace of a backend instance built from ``config`` (any object with SGLang's config fields).

    NS-1..NS-4: model, PP, CP and TP coordinates are all part of it.
    NS-5: with replicated KV the TP coordinate is ``tp-shared``.
    """
    model = _safe(str(getattr(config, "model_name", None) or "default-model"))
    pp = f"pp{getattr(config, 'pp_rank', 0)}of{getattr(config, 'pp_size', 1)}"
    cp = f"cp{getattr(config, 'attn_cp_rank', 0)}of{getattr(config, 'attn_cp_size', 1)}"
    if getattr(config, "is_mla_model", False):
        tp = "tp-shared"
    else:
        tp = f"tp{getattr(config, 'tp_rank', 0)}of{getattr(config, 'tp_size', 1)}"
    return f"{model}/{pp}/{cp}/{tp}"


def storage_name(namespace: str, key: str, pool: str = "kv") -> str:
    """Return the stored object's name for ``key`` in ``pool`` under ``namespace`` (NS-6: one scheme for every call)."""
    return f"{namespace}/{_safe(str(pool))}/{_safe(key)}"
