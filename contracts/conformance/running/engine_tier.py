"""The engine-driven tier: a pinned SGLang release's own controller drives the vendor's backend, on CPU.

With a release importable, ``run_engine_tier`` builds the release's ``HiCacheController`` over its own
CPU host pool (``MHATokenToKVPoolHost``, via ``release_pools``), attaches the backend the way the
engine does (``attach_storage_backend``: the release's ``StorageBackendFactory`` builds it from the
dynamic-backend config, or builds an in-tree backend by name, on the calling thread, registers the
host pool, picks the interface, starts the real storage threads), puts the project's
``RecordingBackend`` between the controller and the backend, and plays the scheduler's part of each
scenario (allocate the hit's host rows, hand the operation over, collect the acks):

- ``write-through, full hit``: back up a chain of several storage batches, prefetch it again;
- ``partial hit``: prefetch a chain longer than the one stored: the hit is the stored part;
- ``prefix metadata off / [] / list``: both operations with ``prefix_keys`` None, ``[]``, a list;
- ``fresh instance``: a second controller with a new backend instance reads what the first wrote;
- ``clear``: after ``clear()`` the chain is a miss;
- ``MLA, two TP ranks``: with an MLA model (replicated KV) TP rank 0, the storage writer, backs up,
  and TP rank 1 (its own controller and backend instance) reads every page;
- ``hybrid sidecars, full hit / partial hit``: the release's ``HybridCacheController`` with an SWA
  window and a KV-derived pool, each operation and its pool transfers built by the release's tree
  code (``engine_hybrid``); a release lacking a piece skips them, naming it.

Verdicts are byte-exact: every page the acks report loaded holds, slot by slot, the bytes backed
up from it, and every other page of the host pool is untouched. A failure names the SGLang
function that made the failing call (read from the release's source: ``call_shapes``).

What is the project's, each the smallest stand-in (as in ``tests/sglang/real_engine.py``): the
token-to-KV allocator (an object whose ``get_kvcache()`` returns the device pool), the process
groups (single rank, ``tp_group=None``), the scheduler thread (this module), and on 0.5.20-0.5.22
the controller's ``device_module`` set to ``torch.cpu`` without a CUDA device.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Optional

import torch

from hicache_contracts.conformance.running.engine_hybrid import HYBRID_SCENARIOS
from hicache_contracts.conformance.running.engine_parts import (
    EXTRA_PAGES,
    HOST_PAGES,
    PAGE_SIZE,
    STORED_PAGES,
    WAIT_S,
    Allocator,
    await_prefetch,
    callers,
    cpu_device_module,
    engine_process,
    file_dir,
    read_method,
)

__all__ = ["SCENARIOS", "ScenarioVerdict", "run_engine_tier"]

SCENARIOS: tuple[str, ...] = (
    "write-through, full hit",
    "partial hit",
    "prefix metadata off",
    "prefix metadata []",
    "prefix metadata list",
    "fresh instance reads",
    "clear",
    "MLA, two TP ranks",
    *HYBRID_SCENARIOS,
)
"""The scenarios, in the order they run."""


@dataclass(frozen=True)
class ScenarioVerdict:
    """One scenario's outcome: ``failed`` says what went wrong and which SGLang function made the call."""

    scenario: str
    failed: str = ""
    duration_s: float = 0.0
    skipped: str = ""
    """Why the scenario did not run with this release ('' when it ran): the piece the release lacks."""

    @property
    def passed(self) -> bool:
        return not self.failed


class _Engine:
    """The release's HiCacheController over its CPU host pool, with the backend attached as the engine attaches it."""

    def __init__(
        self,
        attach: tuple[str, Optional[dict[str, Any]]],
        folder: Optional[str],
        model: str,
        *,
        kind: str = "mha",
        tp_rank: int = 0,
        tp_size: int = 1,
    ) -> None:
        from hicache_contracts.conformance.session.release_pools import release_host_pool
        from hicache_contracts.engine import RecordingBackend

        self.cc = importlib.import_module("sglang.srt.managers.cache_controller")
        cpu_device_module()
        self.utils = importlib.import_module("sglang.srt.mem_cache.utils")
        self.pool = release_host_pool(
            kind=kind, layout="layer_first", pages=HOST_PAGES, page_size=PAGE_SIZE, layer_num=2, head_num=2, head_dim=8
        )
        self.controller = self.cc.HiCacheController(
            Allocator(self.pool.device_pool), self.pool, PAGE_SIZE, None, threading.Event()
        )
        name, extra = attach
        with engine_process(self.cc, tp_rank, tp_size), file_dir(folder):
            self.controller.attach_storage_backend(
                name,
                prefetch_threshold=PAGE_SIZE,
                model_name=model,
                storage_backend_extra_config=None if extra is None else dict(extra),
            )
        self.backend = self.controller.storage_backend
        self.rec = RecordingBackend(self.backend)
        self.controller.storage_backend = self.rec  # the storage threads read the attribute at each call
        self.written: dict[str, torch.Tensor] = {}

    def close(self) -> None:
        self.controller.storage_backend = self.backend
        with contextlib.suppress(Exception):
            self.controller.detach_storage_backend()

    def keys(self, tokens: list[int]) -> list[str]:
        return list(self.utils.get_storage_hash_str(tokens, None, page_size=PAGE_SIZE))

    def backup(self, tokens: list[int], prefix_keys: Optional[list[str]], seed: int) -> Any:
        keys = self.keys(tokens)
        rows = self.pool.alloc(len(keys) * PAGE_SIZE)
        generator = torch.Generator().manual_seed(seed)
        template = self.pool.get_dummy_flat_data_page()
        for number, key in enumerate(keys):
            page = torch.randn(template.shape, generator=generator).to(template.dtype)
            self.pool.set_from_flat_data_page(rows[number * PAGE_SIZE], page)
            self.written[key] = page
        self.controller.write_storage(rows, tokens, hash_value=keys, prefix_keys=prefix_keys)
        done = self.controller.ack_backup_queue.get(timeout=WAIT_S)
        self.pool.free(rows)
        return done

    def snapshot(self) -> list[torch.Tensor]:
        return [self.pool.get_data_page(page * PAGE_SIZE).reshape(-1).clone() for page in range(self.pool.page_count)]

    def prefetch(self, tokens: list[int], prefix_keys: Optional[list[str]]) -> tuple[Any, int, list[torch.Tensor]]:
        """Run one prefetch as the scheduler would; return (operation, tokens the acks report loaded, snapshot before)."""
        operation = self.controller.prefetch("r-1", tokens, None, prefix_keys)
        queried = self.controller.prefetch_hit_queue.get(timeout=WAIT_S)
        if queried is not operation:
            raise AssertionError("the controller's hit query answered another operation")
        hits = operation.storage_hit_count
        before = self.snapshot()
        operation.host_indices = self.pool.alloc(max(hits, PAGE_SIZE))
        return operation, await_prefetch(self.controller, operation), before


def _check_loaded(engine: _Engine, operation: Any, loaded: int, before: list[torch.Tensor], expect_pages: int) -> str:
    """What is wrong with a prefetch's outcome ('' when nothing): hit count, bytes slot by slot, guard pages."""
    hits = operation.storage_hit_count // PAGE_SIZE
    if hits != expect_pages:
        return (
            f"the hit query found {hits} of the {expect_pages} pages written "
            f"(batch_exists, called by {callers('batch_exists')})"
        )
    if loaded // PAGE_SIZE != expect_pages:
        method = read_method(engine)
        return f"{loaded // PAGE_SIZE} of {expect_pages} pages loaded ({method}, called by {callers(method)})"
    rows = {int(operation.host_indices[number * PAGE_SIZE]) // PAGE_SIZE for number in range(expect_pages)}
    for number, key in enumerate(operation.hash_value[:expect_pages]):
        got = engine.pool.get_data_page(operation.host_indices[number * PAGE_SIZE]).reshape(-1)
        wanted = engine.written[key]
        if not torch.equal(got.view(torch.uint8), wanted.reshape(-1).view(torch.uint8)):
            method = read_method(engine)
            return f"page {number} of the chain loaded other bytes than were backed up ({method}, called by {callers(method)})"
    for page, old in enumerate(before):
        if page in rows:
            continue
        now = engine.pool.get_data_page(page * PAGE_SIZE).reshape(-1)
        if not torch.equal(now.view(torch.uint8), old.view(torch.uint8)):
            method = read_method(engine)
            return f"host page {page}, outside the rows read, changed ({method}, called by {callers(method)})"
    return ""


def run_engine_tier(
    *,
    sglang_config: Optional[Mapping[str, Any]] = None,
    in_tree: Optional[str] = None,
    folder: Optional[str] = None,
    model: str = "engine-tier",
) -> list[ScenarioVerdict]:
    """Run every scenario with the loaded release's controller over the backend; return a verdict per scenario.

    ``sglang_config`` is the dynamic-backend JSON (attached as ``dynamic``); ``in_tree`` names an in-tree
    backend instead (``file``: its files under ``folder``).
    """
    if (sglang_config is None) == (in_tree is None):
        raise ValueError("run_engine_tier: give exactly one of sglang_config and in_tree")
    attach = ("dynamic", dict(sglang_config)) if sglang_config is not None else (str(in_tree), None)
    verdicts: list[ScenarioVerdict] = []
    engine = _Engine(attach, folder, model)
    base = [0]

    def chain(pages: int) -> list[int]:
        start = base[0]
        base[0] += 100_000
        return list(range(start, start + pages * PAGE_SIZE))

    def scenario(name: str, body: Callable[[], str]) -> None:
        started = time.monotonic()
        try:
            failed = body()
        except Exception as error:  # a verdict, never a crash
            failed = f"{type(error).__name__}: {error}"
        engine.rec.clear_calls()
        verdicts.append(ScenarioVerdict(name, failed, time.monotonic() - started))

    def round_trip(prefix: Optional[list[str]], ask_extra: int = 0) -> str:
        tokens = chain(STORED_PAGES + ask_extra)
        stored = tokens[: STORED_PAGES * PAGE_SIZE]
        done = engine.backup(stored, list(prefix) if prefix is not None else None, seed=base[0])
        if done.completed_tokens != len(stored):
            return (
                f"the backup completed {done.completed_tokens} of {len(stored)} tokens "
                f"({engine.controller.page_set_func.__name__.lstrip('_')}, called by HiCacheController.backup_thread_func)"
            )
        operation, loaded, before = engine.prefetch(tokens, list(prefix) if prefix is not None else None)
        try:
            return _check_loaded(engine, operation, loaded, before, STORED_PAGES)
        finally:
            engine.pool.free(operation.host_indices)

    try:
        scenario("write-through, full hit", lambda: round_trip(["p0"]))
        scenario("partial hit", lambda: round_trip(["p0"], ask_extra=EXTRA_PAGES))
        scenario("prefix metadata off", lambda: round_trip(None))
        scenario("prefix metadata []", lambda: round_trip([]))
        scenario("prefix metadata list", lambda: round_trip(["p0", "p1"]))
        shared = chain(STORED_PAGES)
        engine.backup(shared, None, seed=7)

        def fresh() -> str:
            other = _Engine(attach, folder, model)
            other.written = engine.written
            try:
                operation, loaded, before = other.prefetch(shared, None)
                return _check_loaded(other, operation, loaded, before, STORED_PAGES)
            finally:
                other.close()

        scenario("fresh instance reads", fresh)

        def cleared() -> str:
            try:
                engine.backend.clear()
            except Exception:  # a failed clear, which SGLang reports and keeps its beliefs for (BE-11)
                return ""
            operation, _, _ = engine.prefetch(shared, None)
            engine.pool.free(operation.host_indices)
            if operation.storage_hit_count:
                return (
                    f"after clear() the hit query still found {operation.storage_hit_count // PAGE_SIZE} pages "
                    f"(batch_exists, called by {callers('batch_exists')})"
                )
            return ""

        scenario("clear", cleared)

        def mla_ranks() -> str:
            writer = _Engine(attach, folder, model + "-mla", kind="mla", tp_rank=0, tp_size=2)
            try:
                tokens = chain(STORED_PAGES)
                done = writer.backup(tokens, None, seed=11)
                if done.completed_tokens != len(tokens):
                    return f"TP rank 0 (the storage writer) backed up {done.completed_tokens} of {len(tokens)} tokens"
                reader = _Engine(attach, folder, model + "-mla", kind="mla", tp_rank=1, tp_size=2)
                reader.written = writer.written
                try:
                    operation, loaded, before = reader.prefetch(tokens, None)
                    found = _check_loaded(reader, operation, loaded, before, STORED_PAGES)
                    return f"TP rank 1 of an MLA model: {found}" if found else ""
                finally:
                    reader.close()
            finally:
                writer.close()

        scenario("MLA, two TP ranks", mla_ranks)
    finally:
        engine.close()

    def hybrid(name: str, body: Callable[[], str], recorder: Any, setup_s: float) -> None:
        started = time.monotonic()
        try:
            failed = body()
        except Exception as error:  # a verdict, never a crash
            failed = f"{type(error).__name__}: {error}"
        if recorder is not None:
            recorder.clear_calls()
        verdicts.append(ScenarioVerdict(name, failed, setup_s + time.monotonic() - started))

    def skip(name: str, reason: str) -> None:
        verdicts.append(ScenarioVerdict(name, skipped=reason))

    from hicache_contracts.conformance.running.engine_hybrid import run_hybrid_scenarios

    run_hybrid_scenarios(attach, folder, model, hybrid, skip)
    return verdicts


# ---------------------------------------------------------------- the report section
SCENARIO_CLAUSES: dict[str, tuple[str, ...]] = {
    "write-through, full hit": ("BE-17", "BE-15", "BE-16"),
    "partial hit": ("BE-2", "BE-15", "BE-16"),
    "prefix metadata off": ("PFX-1",),
    "prefix metadata []": ("PFX-1",),
    "prefix metadata list": ("PFX-1",),
    "fresh instance reads": ("NS-7",),
    "clear": ("BE-11",),
    "MLA, two TP ranks": ("NS-5",),
    "hybrid sidecars, full hit": ("HYB-6", "HYB-7", "BE-21", "BE-22"),
    "hybrid sidecars, partial hit": ("HYB-7", "BE-21", "BE-22"),
    "hybrid Mamba state, partial hit": ("HYB-7", "BE-21"),
}
"""The clauses each scenario's byte-exact verdict bears on."""


LEGACY_CLAUSES: dict[str, tuple[str, ...]] = {"BE-17": ("BE-9",), "BE-15": ("BE-9",), "BE-16": ()}
"""What the v1 clauses of ``SCENARIO_CLAUSES`` become when SGLang drives the legacy path (no ``interface_v1``)."""


def engine_tier_section(
    verdicts: list[ScenarioVerdict], *, subject: str, release: str, duration_s: float, v1: bool = True
) -> Any:
    """Return the scenarios' verdicts as a report section: a verdict per clause the scenarios bear on."""
    from hicache_contracts.conformance.reporting.report import (
        FAIL,
        PASS,
        ClauseVerdict,
        Failure,
        LevelVerdict,
        ReportSection,
    )
    from hicache_spec import LEVELS, clause

    by_clause: dict[str, list[ScenarioVerdict]] = {}
    for verdict in verdicts:
        if verdict.skipped:
            continue
        for named in SCENARIO_CLAUSES.get(verdict.scenario, ()):
            for clause_id in (named,) if v1 else LEGACY_CLAUSES.get(named, (named,)):
                if verdict not in by_clause.setdefault(clause_id, []):
                    by_clause[clause_id].append(verdict)
    results = []
    for clause_id, scenarios in by_clause.items():
        registered = clause(clause_id)
        failed = [item for item in scenarios if not item.passed]
        failures = tuple(Failure(f"engine tier: {item.scenario}", item.failed) for item in failed)
        results.append(
            ClauseVerdict(
                clause_id,
                registered.level,
                registered.statement,
                FAIL if failed else PASS,
                failed[0].failed if failed else None,
                failures,
                tuple(f"engine tier: {item.scenario}" for item in scenarios),
            )
        )
    levels = tuple(
        LevelVerdict(level, True, "driven by the engine", description=LEVELS[level])
        for level in dict.fromkeys(result.level for result in results)
    )
    return ReportSection(
        title=f"SGLang {release}'s HiCacheController drives the backend (engine-driven tier)",
        subject=subject,
        levels=levels,
        clauses=tuple(results),
        notes=(
            *(
                ()
                if all(item.skipped for item in verdicts)
                else (
                    "the release's own controller attached the backend as the engine does and made every call; "
                    "bytes compared slot by slot, other host pages checked untouched",
                    "scenarios: " + ", ".join(f"{item.scenario} ({_mark(item)})" for item in verdicts),
                )
            ),
            *_skip_notes(verdicts),
        ),
        duration_s=duration_s,
    )


def _skip_notes(verdicts: list[ScenarioVerdict]) -> list[str]:
    """One note per reason scenarios did not run, naming them (every scenario: said once)."""
    by_reason: dict[str, list[str]] = {}
    for item in verdicts:
        if item.skipped:
            by_reason.setdefault(item.skipped, []).append(item.scenario)
    if len(by_reason) == 1 and len(next(iter(by_reason.values()))) == len(verdicts):
        return [f"no scenario ran: {next(iter(by_reason))}"]
    return [f"{', '.join(names)}: not run: {reason}" for reason, names in by_reason.items()]


def _mark(verdict: ScenarioVerdict) -> str:
    return "skipped" if verdict.skipped else "pass" if verdict.passed else "FAIL"


def as_dynamic_factory(factory: Any, *, v1: bool) -> Any:
    """Return ``factory`` as the engine tier attaches it: a factory the release built (``--sglang-config``) as it
    is; a ``--backend module:Class`` one as the dynamic-backend config a user would give SGLang for it (its extra
    config, ``interface_v1`` when it claims v1)."""
    if getattr(factory, "engine", None):
        return factory
    module_path, _, class_name = str(factory.name).partition(":")
    config = {
        "backend_name": "hicache-conform",
        "module_path": module_path,
        "class_name": class_name,
        "interface_v1": 1 if v1 else 0,
        **dict(factory.extra_config or {}),
    }
    return SimpleNamespace(name=factory.name, extra_config=config)


def loader_refusal(config: Mapping[str, Any]) -> str:
    """Why the loaded release's dynamic-backend loader refuses the class ``config`` names ('' when it loads it)."""
    storage = importlib.import_module("sglang.srt.mem_cache.storage")
    try:
        storage.StorageBackendFactory._load_backend_class(
            config.get("module_path"), config.get("class_name"), config.get("backend_name")
        )
    except Exception as error:
        return (
            f"SGLang's dynamic-backend loader refuses the class ({type(error).__name__}: {error}); the engine "
            "attaches only a backend it can load"
        )
    return ""


def engine_tier_report(factory: Any) -> Any:
    """Run the engine tier over the backend a release-built ``factory`` (``--sglang-config``) names; return its report."""
    import tempfile

    from hicache_contracts.conformance.reporting.report import SuiteReport
    from hicache_contracts.sglang_release import active_release

    started = time.monotonic()
    config = dict(factory.extra_config or {})
    refusal = loader_refusal(config)
    if refusal:  # SGLang could not load it as a dynamic backend: nothing for its controller to drive
        verdicts = [ScenarioVerdict(name, skipped=refusal) for name in SCENARIOS]
    else:
        with tempfile.TemporaryDirectory(prefix="hicache-engine-tier-") as folder:
            verdicts = run_engine_tier(sglang_config=config, folder=folder)
    section = engine_tier_section(
        verdicts,
        subject=factory.name,
        release=active_release() or "installed",
        duration_s=time.monotonic() - started,
        v1=bool((factory.extra_config or {}).get("interface_v1", 0)),
    )
    return SuiteReport((section,))


# ---------------------------------------------------------------- the generated table
BEGIN = "<!-- engine-tier: generated by python -m hicache_contracts.conformance.running.engine_tier --write -->"
END = "<!-- engine-tier: end -->"
"""The markers around the generated block of ``docs/in-tree-verdicts.md``."""

BACKENDS: dict[str, dict[str, Any]] = {
    "HiCacheFile (in-tree `file`)": {"in_tree": "file"},
    "reference file (dynamic)": {
        "sglang_config": {
            "backend_name": "hicache_file",
            "module_path": "hicache_reference.sglang_adapter",
            "class_name": "SGLangFileBackend",
            "interface_v1": 1,
        }
    },
    "reference memory (dynamic)": {
        "sglang_config": {
            "backend_name": "hicache_memory",
            "module_path": "hicache_reference.sglang_adapter",
            "class_name": "SGLangMemoryBackend",
            "interface_v1": 1,
            "store": "engine-tier",
        }
    },
}
"""The backends the generated table judges, and how each is attached."""

_ONE_RELEASE = """
import json, sys, tempfile, time
from hicache_contracts.sglang_release import use_release
use_release(sys.argv[1])
from hicache_contracts.conformance.running.engine_tier import BACKENDS, run_engine_tier
out = {}
for name, how in BACKENDS.items():
    with tempfile.TemporaryDirectory(prefix="hicache-engine-tier-") as folder:
        how = dict(how)
        if "sglang_config" in how and how["sglang_config"]["class_name"] == "SGLangFileBackend":
            how["sglang_config"] = dict(how["sglang_config"], path=folder)
        started = time.monotonic()
        verdicts = run_engine_tier(folder=folder, **how)
        out[name] = {
            "seconds": time.monotonic() - started,
            "verdicts": [[v.scenario, v.failed, v.skipped, round(v.duration_s, 1)] for v in verdicts],
        }
print("ENGINE-TIER " + json.dumps(out))
"""


def _run_release(version: str) -> dict[str, Any]:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _ONE_RELEASE, version], capture_output=True, text=True, timeout=1200)
    for line in done.stdout.splitlines():
        if line.startswith("ENGINE-TIER "):
            result: dict[str, Any] = json.loads(line[len("ENGINE-TIER ") :])
            return result
    raise RuntimeError(
        f"SGLang {version}: the engine tier did not run: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    )


def render_block(results: Mapping[str, Mapping[str, Any]]) -> str:
    """Return the generated block: per release and backend, the scenarios that passed, and each failure."""
    lines = [
        BEGIN,
        "",
        "| release | backend | " + " | ".join(SCENARIOS) + " |",
        "|---|---|" + "---|" * len(SCENARIOS),
    ]
    failures: list[str] = []
    for version, backends in results.items():
        for backend, outcome in backends.items():
            marks = []
            for scenario, failed, *rest in outcome["verdicts"]:
                skipped = rest[0] if rest else ""
                marks.append("skip" if skipped else "fail" if failed else "pass")
                if failed:
                    failures.append(f"- {version}, {backend}, {scenario}: {failed}")
                if skipped:
                    failures.append(f"- {version}, {backend}, {scenario}: not run: {skipped}")
            lines.append(f"| {version} | {backend} | " + " | ".join(marks) + " |")
    lines += [""] + (failures or ["No scenario fails on any pinned release."]) + ["", END]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    """Write (``--write FILE``) or check (``--check FILE``) the generated block; print each run's time."""
    import argparse
    import sys

    from hicache_spec.releases import SGLANG_RELEASES

    parser = argparse.ArgumentParser(prog="python -m hicache_contracts.conformance.running.engine_tier")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE")
    mode.add_argument("--check", metavar="FILE")
    args = parser.parse_args(argv)
    path = Path(args.write or args.check)
    results = {}
    for version in SGLANG_RELEASES:
        results[version] = _run_release(version)
        for backend, outcome in results[version].items():
            hybrid = sum(item[3] for item in outcome["verdicts"] if item[0] in HYBRID_SCENARIOS and len(item) > 3)
            print(
                f"SGLang {version}, {backend}: {outcome['seconds']:.1f} s (hybrid scenarios {hybrid:.1f} s)",
                file=sys.stderr,
            )
    block = render_block(results)
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"engine_tier: {path} must hold the markers {BEGIN!r} and {END!r}", file=sys.stderr)
        return 2
    fresh = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    if args.write:
        path.write_text(fresh, encoding="utf-8")
        print(f"wrote {path}")
        return 0
    if fresh != text:
        print(f"engine_tier: {path} is stale (regenerate with --write {path})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
