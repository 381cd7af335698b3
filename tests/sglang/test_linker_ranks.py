"""SGLang's Mooncake direct linker on two real TP ranks: two processes, a gloo TP group, one store.

Scenario: inside a process holding one pinned release, two spawned processes join a gloo process
group (world size 2, a file rendezvous) and each builds the release's MooncakeDirectLinker as the
linker suite does, with that group as its TP cache group, over one file-backed fake store both see
(``tests/sglang/linker_ranks.py``). Rank-replicated pools (a DSA KV cache): rank 1 offloads, then
rank 0; rank 1 looks up rank 0's pages. TP-sharded pools (a hybrid Mamba stack, 0.5.23+): each
rank offloads and the other looks its pages up. Planted: the release's linker with
``offload_owner`` forced True on every rank; the release's linker naming TP-sharded objects
without the TP rank.
Expected: a non-owner rank's offload returns True, reports True and writes nothing (LNK-20); TP
rank 1 finds the owner's replicated pages, and a TP rank never finds another's sharded pages while
the writer does (LNK-21). Each planted variant fails its own clause and only it. Every wait is
bounded; a rank that hangs is killed and the test fails naming the step.
Why it matters: the linker reads its TP rank from torch.distributed, so one process is always TP
rank 0 and the single-process suite cannot see a rank that writes or reads another's pages; on
rank 0 the planted ``offload_owner`` override changes nothing.
"""

from __future__ import annotations

import importlib

import pytest

from hicache_spec.registry import clause, holds_for
from hicache_contracts.linker.suite import FAIL, run_linker_suite
from tests.linker.mooncake_fake import mooncake_factory
from tests.sglang.linker_ranks import (
    EVERY_RANK_WRITES,
    MOONCAKE,
    PLANTED,
    TP_BLIND_NAMES,
    RanksRun,
    planted_class,
    run_ranks,
    sharded_stack_built,
)


@pytest.fixture(scope="module")
def mooncake(release):
    """The release's Mooncake direct linker module, or a skip naming why it cannot be built on CPU."""
    for clause_id in ("LNK-20", "LNK-21"):
        if not holds_for(clause(clause_id), release):
            pytest.skip(f"{clause_id} does not hold for {release}")
    try:
        return importlib.import_module(MOONCAKE)
    except Exception as error:  # noqa: BLE001 - any import failure is a reason to skip, given in full
        pytest.skip(f"SGLang {release}'s Mooncake direct linker does not import on CPU: {error!r}")


@pytest.fixture
def sharded(release, mooncake) -> None:
    reason = sharded_stack_built(release)
    if reason:
        pytest.skip(reason)


def _ran(run: RanksRun) -> RanksRun:
    print(run.render())
    assert run.failure is None, run.render()
    return run


@pytest.mark.clause("LNK-20", "LNK-21")
def test_replicated_pools_one_writer_every_rank_finds(release, mooncake, tmp_path) -> None:
    run = _ran(run_ranks(release, "replicated", tmp_path))
    assert not run.failed(), run.render()
    checked = {(s.rank, s.step) for s in run.steps}
    assert checked == {
        (1, "rank 1 offloads replicated pages"),
        (0, "rank 0 does not find rank 1's pages"),
        (0, "rank 0 offloads replicated pages"),
        (1, "rank 1 finds the owner's pages"),
    }, run.render()
    assert run.verdict("LNK-20") == run.verdict("LNK-21") == "pass"


@pytest.mark.clause("LNK-21")
def test_sharded_pools_ranks_never_see_each_other(release, mooncake, sharded, tmp_path) -> None:
    run = _ran(run_ranks(release, "sharded", tmp_path))
    assert not run.failed(), run.render()
    assert len(run.steps) == 6 and run.verdict("LNK-21") == "pass", run.render()


@pytest.mark.clause("LNK-20")
def test_planted_every_rank_writes_fails_lnk20(release, mooncake, tmp_path) -> None:
    run = _ran(run_ranks(release, "replicated", tmp_path, EVERY_RANK_WRITES))
    assert {s.clause for s in run.failed()} == {"LNK-20"}, run.render()
    assert "rank 1 offloads replicated pages" in [s.step for s in run.failed()], (
        run.render()
    )  # in whatever order the ranks report
    assert "0 object(s) written" not in run.failed()[0].detail, run.render()


@pytest.mark.clause("LNK-21")
def test_planted_tp_blind_names_fails_lnk21(release, mooncake, sharded, tmp_path) -> None:
    run = _ran(run_ranks(release, "sharded", tmp_path, TP_BLIND_NAMES))
    failed = run.failed()
    assert {s.clause for s in failed} == {"LNK-21"}, run.render()
    assert sorted(s.step for s in failed) == [
        "rank 0 does not find rank 1's pages; rank 1 does",
        "rank 1 does not find rank 0's pages; rank 0 does",
    ], run.render()


@pytest.mark.clause("LNK-20", "LNK-21")
@pytest.mark.parametrize("variant", PLANTED)
def test_planted_variants_pass_the_one_process_suite(release, mooncake, variant, monkeypatch) -> None:
    """Only the two-rank test catches them: the linker suite in one process (TP rank 0) finds nothing."""
    monkeypatch.setattr(mooncake, "MooncakeDirectLinker", planted_class(mooncake, variant))
    report = run_linker_suite(factory=mooncake_factory(release))
    failed = [row.check for row in report.results if row.status == FAIL and row.counted]
    assert report.ok and not failed, report.render()


def test_a_hung_rank_is_killed_and_named(release, mooncake, tmp_path, monkeypatch) -> None:
    """The parent's bound: a rank that never reports is killed, and the failure names its step."""
    from tests.sglang import linker_ranks

    monkeypatch.setattr(linker_ranks, "STEP_TIMEOUT", 0.0)
    run = run_ranks(release, "replicated", tmp_path)
    assert run.failure is not None and "killed rank" in run.failure and "in step" in run.failure, run.render()
