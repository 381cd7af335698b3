"""Backdoor hooks: an optional path to a backend's stored objects that bypasses the backend's own methods.

A backend (or its test fixture) *may* offer them; the checks that need them
(``checks_backdoor``) run where they are offered and are skipped, with the
reason, where not. The hooks address one page's stored object by the
backend instance (its namespace), the page key and the pool name ("kv",
"indexer", ...); the suite never knows how the backend names its objects.

    class MyBackdoor:
        def plant(self, backend, key, pool, data): ...   # store ``data`` as the page's object
        def peek(self, backend, key, pool): ...          # the page's object, or None
        def remove(self, backend, key, pool): ...        # delete the page's object (absent: no error)

    run_suite(BackendFactory(MyStore, extra, backdoor=MyBackdoor()), options)

``data`` is the page's bytes as the backend would hold them for one page; a
backend that frames its objects (a header, a checksum) frames what it is
given, so that a planted object shorter than a page reads as a short page.
The hooks must not call the backend's page methods: they are the
independent path the checks compare the backend against.

Where the hooks come from (``backdoor_of``): the factory's ``backdoor``;
else the backend class's ``hicache_backdoor`` attribute, which travels with
``--backend module:Class`` on the command line.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable

from hicache_contracts.errors import bad_value

__all__ = ["BACKDOOR_ATTRIBUTE", "Backdoor", "backdoor_of", "no_backdoor_reason"]

BACKDOOR_ATTRIBUTE = "hicache_backdoor"
"""The backend class attribute the suite reads the hooks from when the factory gives none."""


@runtime_checkable
class Backdoor(Protocol):
    """Plant, peek and remove one page's stored object, bypassing the backend's methods."""

    def plant(self, backend: Any, key: str, pool: str, data: bytes) -> None:
        """Store ``data`` as the object of page ``key`` of ``pool``, in ``backend``'s namespace."""

    def peek(self, backend: Any, key: str, pool: str) -> Optional[bytes]:
        """Return the stored object of page ``key`` of ``pool``, or None when there is none."""

    def remove(self, backend: Any, key: str, pool: str) -> None:
        """Delete the stored object of page ``key`` of ``pool``; a missing one is no error."""


def backdoor_of(factory: Any) -> Optional[Backdoor]:
    """Return the hooks ``factory`` offers (its ``backdoor``, else its class's ``hicache_backdoor``), or None."""
    hooks = getattr(factory, "backdoor", None)
    if hooks is None:
        hooks = getattr(getattr(factory, "backend_class", None), BACKDOOR_ATTRIBUTE, None)
    if hooks is not None and not isinstance(hooks, Backdoor):
        raise bad_value(BACKDOOR_ATTRIBUTE, "must have plant, peek and remove methods", hooks)
    return hooks


def no_backdoor_reason() -> str:
    """The reason a check that needs the hooks is skipped where the backend offers none."""
    return (
        "backend offers no backdoor hooks: pass BackendFactory(..., backdoor=...) or set the class attribute "
        f"{BACKDOOR_ATTRIBUTE} (an object with plant, peek and remove; see docs/vendors.md)"
    )
