"""The suite context is built complete: from the run's session, once the backend's levels are decided.

Scenario: a session and a context built by hand, and runners started on a correct and a broken backend.
Expected: what the context's collaborators do follows the levels it was built with; the runner builds the
context only after deciding the levels, and not at all for a backend that cannot be built; names are
fresh; cleanup notes what goes wrong and goes on.
Why it matters: a collaborator whose fields are set after construction can be used before they are.
"""

from __future__ import annotations

import torch

from typing import Any

import pytest

from hicache_contracts.conformance import BackendFactory, SuiteOptions, SuiteRunner
from hicache_contracts.conformance.session.context import Session, SuiteContext
from hicache_contracts.conformance.session.names import Names
from tests.conformance.correct_backend import CorrectBackend
from tests.conformance.helpers import fresh_store

OPTIONS = SuiteOptions(profile="smoke", seed=7, sglang_version="none")


def factory(backend: type = CorrectBackend) -> BackendFactory:
    return BackendFactory(backend, {"store": fresh_store()})


@pytest.mark.parametrize(
    ("claimed", "v2", "path"),
    [(frozenset({"core", "legacy"}), False, "legacy"), (frozenset({"core", "v1", "v2"}), True, "v1")],
    ids=["legacy", "v1-v2"],
)
def test_the_context_follows_the_levels_it_was_built_with(claimed: frozenset, v2: bool, path: str) -> None:
    session = Session(factory(), OPTIONS, run_id="0123456789")
    context = SuiteContext(session, claimed=claimed, may_evict=True)
    try:
        assert (context.instances.register_v2, context.io.io_path(), context.io.may_evict) == (v2, path, True)
        assert sorted(context.instances.main.sidecars) == (["indexer", "swa"] if v2 else [])
        assert context.instances.instances == (context.instances.main,)
    finally:
        session.close()
    assert session.built.instances == () and session.built.cleanup_notes == []


def test_the_runner_builds_the_context_once_the_levels_are_decided() -> None:
    runner = SuiteRunner(factory(), SuiteOptions(profile="smoke", seed=7, sglang_version="none", levels=("legacy",)))
    assert runner.context is None
    with runner:
        assert runner.context is not None and runner.decision is not None
        assert runner.context.claimed == runner.decision.claimed == frozenset({"core", "legacy"})
        assert (runner.context.instances.register_v2, runner.context.io.io_path()) == (False, "legacy")
        assert [instance.tag for instance in runner.session.built.instances] == ["probe"]


class Unbuildable(CorrectBackend):
    def __init__(self, storage_config: Any, kwargs: Any = None) -> None:
        raise RuntimeError("store unreachable")


def test_a_backend_that_cannot_be_built_gets_no_context() -> None:
    with SuiteRunner(factory(Unbuildable), OPTIONS) as runner:
        assert runner.context is None and runner.startup_failure is not None
        assert runner.startup_failure.clause_id == "BE-1"


def test_names_are_fresh_and_labelled_in_order() -> None:
    names = Names("0123456789", "model-run-0123456789")
    first, second = names.new_keys(2)
    assert (names.label(first), names.label(second), names.label("other")) == ("k0", "k1", "'other'")
    assert first != second and len(first) == 64 and Names("0123456789", "m").new_keys(1) == [first]
    assert [names.namespace("ns"), names.namespace("ns")] == ["model-run-0123456789-ns0", "model-run-0123456789-ns1"]
    assert names.show([first, second]) == "[k0, k1]"


def test_only_integer_vectors_are_shown_as_host_slots() -> None:
    """Host indices are 1-D integer tensors; a tensor of bools (a flag given as a mask) or a flat page of data is
    shown by its shape and dtype, not called slots."""
    names = Names("0123456789", "m")
    assert names.show(torch.arange(4)) == "<4 host slots>"
    assert names.show(torch.arange(4, dtype=torch.int32)) == "<4 host slots>"
    assert names.show(torch.ones(4, dtype=torch.bool)) == "<tensor (4,) bool>"
    assert names.show(torch.zeros(8, dtype=torch.float16)) == "<tensor (8,) float16>"
    assert names.show(torch.zeros(2, 3)) == "<tensor (2, 3) float32>"


def test_cleanup_notes_a_raising_clear_and_still_closes_every_instance() -> None:
    session = Session(factory(), OPTIONS, run_id="0123456789")
    builder = session.instances(register_v2=False)
    first = builder.build(builder.config(model_name=session.names.namespace("a")), pages=2, tag="first")
    second = builder.build(builder.config(model_name=session.names.namespace("b")), pages=2, tag="second")
    closed: list[str] = []

    def refuse() -> None:
        raise RuntimeError("boom")

    first.backend.clear = refuse
    for instance in (first, second):
        instance.backend.close = lambda tag=instance.tag: closed.append(tag)
    session.close()
    assert session.built.cleanup_notes == ["clear() on first raised RuntimeError: boom"]
    assert closed == ["second", "first"]  # the last built is closed first
    assert session.built.instances == ()
