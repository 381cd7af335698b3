"""What a conformance run is told: the profile (how hard to look) and the options (what to build).

Profiles size the work, not the rules: every profile checks every clause of
the claimed levels; a larger one tries more examples, longer state-machine
runs and more concurrent operations.

    smoke       a few examples per property; meant for CI on every change
    standard    the default; the numbers a vendor should publish
    exhaustive  many more examples and operations, for a nightly run
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from hicache_contracts.errors import FieldErrors, bad_value
from hicache_contracts.host_pool import KINDS, LAYOUTS
from hicache_contracts.json_depth import nesting_depth
from hicache_contracts.conformance.levels import BACKEND_LEVELS
from hicache_spec import STORAGE_BATCH_SIZE
from hicache_spec.releases import SGLANG_RELEASES
from hicache_spec.values import is_count

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_NODES",
    "MAX_MODEL_NAME_LENGTH",
    "MAX_PAGE_SIZE",
    "MAX_TIMEOUT_S",
    "PROFILES",
    "Profile",
    "SuiteOptions",
    "check_path",
    "load_config",
    "load_text",
]

MAX_PAGE_SIZE = 4096
"""Largest page size the suite runs with: its main pool holds 520 pages, about 68 KiB per token slot of page
size at the suite's shape (0.27 GiB at 4096); SGLang's page sizes are far below it."""
MAX_TIMEOUT_S = 86_400.0
"""Longest wait the suite accepts (a day): the platform's wait primitives overflow on larger values."""
MAX_MODEL_NAME_LENGTH = 100
"""Longest base model name: the run adds a run id and tags (about 40 characters), and a file-backed store keeps
the name as one path component of at most 255 bytes."""


@dataclass(frozen=True)
class Profile:
    """How much work each check does."""

    name: str
    """The profile's name (``smoke``, ``standard``, ``exhaustive``)."""
    examples: int
    """Hypothesis examples per property check."""
    stateful_examples: int
    """Runs of the stateful machine."""
    stateful_steps: int
    """Steps per run of the stateful machine."""
    batch_sizes: tuple[int, ...]
    """Page counts the data checks try, ascending, so the first failure is the smallest; always ends with 128."""
    concurrency_threads: int
    """Worker threads mixing exists/get/set (at least 3), besides the get_stats thread."""
    concurrency_operations: int
    """Operations per worker thread."""
    concurrency_keys: int
    """Distinct keys the workers share (few, so that they overlap)."""


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        "smoke",
        examples=6,
        stateful_examples=3,
        stateful_steps=10,
        batch_sizes=(1, 3, STORAGE_BATCH_SIZE),
        concurrency_threads=3,
        concurrency_operations=40,
        concurrency_keys=6,
    ),
    "standard": Profile(
        "standard",
        examples=100,
        stateful_examples=50,
        stateful_steps=30,
        batch_sizes=(1, 2, 5, 17, STORAGE_BATCH_SIZE),
        concurrency_threads=4,
        concurrency_operations=500,
        concurrency_keys=12,
    ),
    "exhaustive": Profile(
        "exhaustive",
        examples=1000,
        stateful_examples=300,
        stateful_steps=60,
        batch_sizes=(1, 2, 3, 5, 17, 64, 127, STORAGE_BATCH_SIZE),
        concurrency_threads=6,
        concurrency_operations=3000,
        concurrency_keys=24,
    ),
}
"""The built-in profiles, by name."""


_ERRORS = FieldErrors("SuiteOptions")


@dataclass(frozen=True)
class SuiteOptions:
    """The options of one conformance run; every field has a default a vendor may keep."""

    model_name: str = "hicache-conform"
    """Base of the run's model name; the suite appends a random run suffix, so it never meets existing pages."""
    page_size: int = 64
    """Tokens per page of the host pools the suite registers."""
    layout: str = "layer_first"
    """Host pool layout: ``layer_first`` or ``page_first``."""
    kind: str = "mha"
    """Host pool kind: ``mha`` (K and V) or ``mla`` (one latent; the main config sets ``is_mla_model``)."""
    levels: Optional[tuple[str, ...]] = None
    """Levels the vendor claims; None: the class attribute ``hicache_levels``, else what probing finds."""
    profile: str = "standard"
    """A key of ``PROFILES``."""
    seed: Optional[int] = None
    """Seed of every random choice; None: a fresh one, printed in the report so a run can be replayed."""
    may_evict: Optional[bool] = None
    """The backend may drop pages it accepted; None: the class attribute ``hicache_may_evict``, else False."""
    checks: Optional[tuple[str, ...]] = None
    """Run only the checks with these names (see ``hicache-conform run --list-checks``); None: all."""
    timeout_s: float = 60.0
    """Bound on any wait for the backend (threads of the concurrency and visibility checks)."""
    sglang_version: Optional[str] = None
    """Whose objects the backend receives: None picks the installed SGLang (contract models when there is
    none), ``"none"`` the contract models, a pinned version that release (installed, or its cached wheel)."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    """Free-form notes copied into the report's options (the CLI records the backend spec here)."""

    def __post_init__(self) -> None:
        if (
            self.sglang_version is not None
            and self.sglang_version != "none"
            and self.sglang_version not in SGLANG_RELEASES
        ):
            raise _ERRORS.bad(
                "sglang_version",
                f"must be none or a pinned release ({', '.join(SGLANG_RELEASES)})",
                self.sglang_version,
            )
        if not isinstance(self.model_name, str) or not self.model_name:
            raise _ERRORS.bad("model_name", "must be a non-empty str", self.model_name)
        if len(self.model_name) > MAX_MODEL_NAME_LENGTH or not self.model_name.isprintable():
            shown = self.model_name if len(self.model_name) <= 60 else self.model_name[:57] + "..."
            raise _ERRORS.bad(
                "model_name",
                f"must be at most {MAX_MODEL_NAME_LENGTH} printable characters, {len(self.model_name)} given",
                shown,
            )
        if not is_count(self.page_size, 1):
            raise _ERRORS.bad("page_size", "must be an int >= 1", self.page_size)
        if self.page_size > MAX_PAGE_SIZE:
            raise _ERRORS.bad(
                "page_size",
                f"must be at most {MAX_PAGE_SIZE} (the suite's pools would not fit in memory)",
                self.page_size,
            )
        if self.layout not in LAYOUTS:
            raise _ERRORS.bad("layout", f"must be one of {list(LAYOUTS)}", self.layout)
        if self.kind not in KINDS:
            raise _ERRORS.bad("kind", f"must be one of {sorted(KINDS)}", self.kind)
        if self.profile not in PROFILES:
            raise _ERRORS.bad("profile", f"must be one of {list(PROFILES)}", self.profile)
        if self.levels is not None:
            if not isinstance(self.levels, tuple) or not all(level in BACKEND_LEVELS for level in self.levels):
                raise _ERRORS.bad("levels", f"must be a tuple of levels from {list(BACKEND_LEVELS)}", self.levels)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise _ERRORS.bad("seed", "must be an int or None", self.seed)
        if self.may_evict is not None and not isinstance(self.may_evict, bool):
            raise _ERRORS.bad("may_evict", "must be a bool or None", self.may_evict)
        if self.checks is not None and (
            not isinstance(self.checks, tuple) or not all(isinstance(name, str) for name in self.checks)
        ):
            raise _ERRORS.bad("checks", "must be a tuple of check names", self.checks)
        if (
            isinstance(self.timeout_s, bool)
            or not isinstance(self.timeout_s, (int, float))
            or not math.isfinite(self.timeout_s)
            or not 0 < self.timeout_s <= MAX_TIMEOUT_S
        ):
            raise _ERRORS.bad(
                "timeout_s", f"must be a finite number of seconds > 0 and <= {MAX_TIMEOUT_S:g}", self.timeout_s
            )

    @property
    def profile_settings(self) -> Profile:
        """The ``Profile`` named by ``profile``."""
        return PROFILES[self.profile]

    def as_dict(self) -> dict[str, Any]:
        """Return the options as plain data, for reports."""
        return {
            "model_name": self.model_name,
            "page_size": self.page_size,
            "layout": self.layout,
            "kind": self.kind,
            "levels": None if self.levels is None else list(self.levels),
            "profile": self.profile,
            "seed": self.seed,
            "may_evict": self.may_evict,
            "checks": None if self.checks is None else list(self.checks),
            "sglang_version": self.sglang_version,
            **self.extra,
        }


# ---------------------------------------------------------------- configuration files and paths
MAX_CONFIG_BYTES = 1 << 20
"""Largest extra config accepted (text or file), 1 MiB: a config names a few endpoints and options."""
MAX_CONFIG_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in an extra config."""
MAX_CONFIG_NODES = 100_000
"""Most values an extra config may hold once every YAML alias is expanded (what any reader of it walks)."""


def check_path(option: str, value: Any) -> str:
    """Return ``value`` as a path, or raise ValueError naming ``option`` when no file system could hold it: a NUL
    byte, or bytes that are not UTF-8 (which the command line hands over as lone surrogates)."""
    text = str(value)
    if "\x00" in text:
        raise bad_value(option, "must be a path without a NUL byte", text)
    if any("\ud800" <= character <= "\udfff" for character in text):
        raise bad_value(option, "must be a path of valid UTF-8 (it holds bytes that are not)", text)
    return text


def load_config(text: Optional[str], *, field_name: str = "--extra-config") -> Optional[dict[str, Any]]:
    """Return the object ``text`` describes: JSON text, or ``@path`` to a JSON, TOML or YAML file; None for none.

    Hostile input is refused fast, with a ValueError naming ``field_name``:
    more than ``MAX_CONFIG_BYTES``, nesting deeper than ``MAX_CONFIG_DEPTH``,
    more than ``MAX_CONFIG_NODES`` values once YAML aliases are expanded (a
    few lines of aliases can stand for billions of values), an alias to
    itself, a value that is not finite (NaN, infinity), a path with a NUL
    byte. YAML is read with the safe loader: plain data, no objects.
    """
    if text is None or not str(text).strip():
        return None
    text = str(text).strip()
    if text.startswith("@"):
        check_path(field_name, text[1:])
        path = Path(text[1:]).expanduser()
        if not path.is_file():
            raise bad_value(field_name, "must name an existing file after '@'", text)
        suffix = path.suffix.lower()
        if suffix not in (".json", ".toml", ".yaml", ".yml"):
            raise bad_value(field_name, "must be a .json, .toml, .yaml or .yml file", str(path))
        kind = suffix[1:].replace("yml", "yaml")
        try:
            with path.open("rb") as stream:
                data = stream.read(MAX_CONFIG_BYTES + 1)
        except OSError as error:
            raise bad_value(field_name, f"must be a readable file ({error.strerror or error})", str(path)) from None
        if len(data) > MAX_CONFIG_BYTES:
            raise bad_value(field_name, f"must be a file of at most {MAX_CONFIG_BYTES} bytes", str(path))
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise bad_value(field_name, f"must be a UTF-8 {kind} file ({error.reason})", str(path)) from None
        shown = str(path)
    else:
        if len(text.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
            raise bad_value(field_name, f"must be at most {MAX_CONFIG_BYTES} bytes", f"{len(text)} characters")
        kind, raw, shown = "json", text, text
    value = _parse_config(raw, kind, field_name, shown)
    if not isinstance(value, dict):
        raise bad_value(field_name, "must be an object (a dict of options)", value)
    _check_config_values(value, field_name)
    return value


def load_text(raw: str, kind: str, *, field_name: str, shown: Optional[str] = None) -> Any:
    """Return the value ``raw`` holds as ``kind`` (``json``, ``toml`` or ``yaml``), any value, under the limits of
    ``load_config`` (size, depth, values with YAML aliases expanded, an alias to itself, NaN); raise ValueError
    naming ``field_name`` and showing ``shown`` (the text itself by default). For every file a user hands over."""
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_CONFIG_BYTES:
        raise bad_value(field_name, f"must be at most {MAX_CONFIG_BYTES} bytes", shown or f"{len(raw)} characters")
    value = _parse_config(raw, kind, field_name, raw if shown is None else shown)
    _check_config_values(value, field_name)
    return value


def _parse_config(raw: str, kind: str, field_name: str, shown: str) -> Any:
    """Parse ``raw`` as ``kind``, turning every parser's complaint into a ValueError naming ``field_name``."""
    what = "a JSON object or @file" if shown == raw else f"a valid {kind} file"
    try:
        if kind == "json":
            if nesting_depth(raw, MAX_CONFIG_DEPTH) > MAX_CONFIG_DEPTH:
                raise _too_deep(field_name)
            return json.loads(raw, parse_constant=_refuse_constant(field_name))
        if kind == "toml":
            import tomllib

            return tomllib.loads(raw)
        return _load_yaml(raw, field_name)
    except RecursionError:
        raise _too_deep(field_name) from None
    except json.JSONDecodeError as error:
        raise bad_value(field_name, f"must be {what} ({error.msg})", shown) from None
    except ValueError as error:  # tomllib's errors, and this module's own
        if str(error).startswith(field_name):
            raise
        raise bad_value(field_name, f"must be {what} ({error})", shown) from None
    except Exception as error:  # yaml.YAMLError
        problem = " ".join(str(error).split())
        raise bad_value(field_name, f"must be {what} ({problem})", shown) from None


def _too_deep(field_name: str) -> ValueError:
    return bad_value(
        field_name,
        f"must not nest arrays and objects more than {MAX_CONFIG_DEPTH} deep",
        f"more than {MAX_CONFIG_DEPTH}",
    )


def _refuse_constant(field_name: str) -> Any:
    def refuse(name: str) -> Any:
        raise bad_value(field_name, "must hold finite numbers only (NaN and infinity are no settings)", name)

    return refuse


def _load_yaml(raw: str, field_name: str) -> Any:
    """Compose the YAML document, check its node graph (size with aliases expanded, depth, no alias to itself)
    before building any object, then build it with the safe constructor."""
    import yaml

    depth = 0
    for event in yaml.parse(raw, Loader=yaml.SafeLoader):  # the parser does not recurse; the composer does
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_CONFIG_DEPTH:
                raise _too_deep(field_name)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    loader = yaml.SafeLoader(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_graph(node, field_name)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_yaml_graph(root: Any, field_name: str) -> None:
    """Raise ValueError naming ``field_name`` when the node graph refers to itself, nests too deep, or expands
    to more than ``MAX_CONFIG_NODES`` values; each node is visited once (its expanded size is remembered)."""
    expanded: dict[int, int] = {}
    on_path: set[int] = set()
    # an explicit stack: a hostile document must not exhaust the interpreter's
    stack: list[tuple[Any, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            expanded[key] = 1 + sum(expanded[id(child)] for child in _children(node))
            if expanded[key] > MAX_CONFIG_NODES:
                raise bad_value(
                    field_name,
                    f"must hold at most {MAX_CONFIG_NODES} values once its YAML aliases are expanded",
                    f"more than {MAX_CONFIG_NODES}",
                )
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise bad_value(field_name, "must not hold a YAML alias to a node that contains it", "an alias to itself")
        if depth > MAX_CONFIG_DEPTH:
            raise _too_deep(field_name)
        on_path.add(key)
        stack.append((node, depth, True))
        for child in _children(node):
            if id(child) in on_path:
                raise bad_value(
                    field_name, "must not hold a YAML alias to a node that contains it", "an alias to itself"
                )
            if id(child) not in expanded:
                stack.append((child, depth + 1, False))


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, list):
        return [part for item in value for part in (item if isinstance(item, tuple) else (item,))]
    return []


def _check_config_values(value: Any, field_name: str) -> None:
    """Raise ValueError naming the place of the first number that is not finite (walking each container once)."""
    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(value, field_name)]
    while stack:
        item, place = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise bad_value(place, "must be a finite number (NaN and infinity are no settings)", item)
        if isinstance(item, (dict, list)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                stack.append((child, f"{place}.{key}" if isinstance(item, dict) else f"{place}[{key}]"))
