"""The probes send only call shapes SGLang sends: the records per pinned release, and the suite held to them.

Scenarios: the stored records (``docs/call-shapes/<release>.json``) against what the wheels give;
the whole probe suite over the reference memory backend, every call's shape noted; planted probe
calls that send a hit query as no release does. Expected: the records are fresh; no probe's hit query
has a shape outside a release's record (a trailing pool's transfer carries placeholders, a KV-derived
one no keys, neither host slots) and every call hands ``extra_info`` in a form the release uses
(``hicache_spec.call_forms``, held to the records here); each planted probe is named with what differs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hicache_contracts.conformance import SuiteOptions, run_suite
from hicache_contracts.conformance.session.call_shapes import (
    PLACEHOLDER,
    load_record,
    recording_class,
    shape_of,
    violations,
)
from hicache_contracts.models import PoolHitPolicy, PoolName, PoolTransfer
from hicache_contracts.sglang_release import ReleaseError, fetch_release
from hicache_reference.backends import MemoryBackend
from hicache_spec.releases import SGLANG_RELEASES

ROOT = Path(__file__).resolve().parents[3]
RECORDS = ROOT / "docs" / "call-shapes"


KNOWN_OUTSIDE = ("trailing_pages transfer (indices_from_pool none) with empty keys",)
"""Shapes a probe sends that no release sends, each kept on purpose: the fold check's examples include a trailing
window of 0 pages (v2_exists_folds_pool_hits_per_policy), where every release sends no transfer at all."""


INJECTOR_FORMS = ("batch_get_v2: extra_info positional", "batch_set_v2: extra_info positional")
"""Forms no record holds that SGLang 0.5.23 sends all the same: its failure injector (HiCacheStorageFailureInjector,
BE-33) hands extra_info on positionally to every method it forwards, and the BE-33 check sends them so through its
proxy (BE-8)."""


def _records() -> list[dict]:
    return [load_record(RECORDS, version) for version in SGLANG_RELEASES]


def _union_of_forms(records: list[dict]) -> dict:
    """One record whose calls are every release's: the stand-in engine speaks for no single release."""
    merged = dict(records[-1])
    merged["calls"] = [call for record in records for call in record["calls"]]
    merged["release"] = "0.5.20-0.5.23"
    return merged


@pytest.mark.clause("HYB-7", "BE-22", "BE-8")
def test_the_probes_send_only_what_a_pinned_release_sends():
    shapes: list = []
    report = run_suite(
        recording_class(MemoryBackend, shapes), SuiteOptions(profile="smoke", seed=0, sglang_version="none")
    )
    assert report.sections[0].clauses
    assert any(shape.transfers for shape in shapes), "no hit query with pool transfers was sent"
    records = _records()
    for record in records:  # hit-query transfers: what each release sends
        found = [
            line
            for line in violations(shapes, record)
            if "extra_info" not in line and not any(known in line for known in KNOWN_OUTSIDE)
        ]
        assert not found, f"{record['release']}: {sorted(set(found))[:10]}"
    found = violations(shapes, _union_of_forms(records))  # extra_info: the stand-in speaks for every release
    assert not [line for line in found if "extra_info" in line and not line.startswith(INJECTOR_FORMS)], sorted(
        set(found)
    )[:10]


def _trailing(keys, **more):
    return PoolTransfer(name=PoolName.SWA, keys=keys, hit_policy=PoolHitPolicy.TRAILING_PAGES, **more)


@pytest.mark.clause("HYB-7", "BE-22", "BE-8")
@pytest.mark.parametrize(
    ("planted", "named"),
    [
        ((["k1", "k2"], [_trailing(["k2"])], None), "trailing_pages transfer (indices_from_pool none) with real keys"),
        (
            (["k1"], [PoolTransfer(name=PoolName.INDEXER, keys=["k1"], indices_from_pool=PoolName.KV)], None),  # type: ignore[arg-type]
            "all_pages transfer (indices_from_pool kv) with real keys",
        ),
        (
            (["k1"], [_trailing([PLACEHOLDER], host_indices=torch.arange(4))], None),
            "trailing_pages transfer with host slots",
        ),
    ],
    ids=["real-trailing-keys", "keys-on-a-kv-derived-pool", "host-slots-in-a-query"],
)
def test_a_planted_probe_outside_the_record_is_named(planted, named):
    shape = shape_of("batch_exists_v2", planted, {})
    for record in _records():
        assert any(named in line for line in violations([shape], record)), violations([shape], record)


@pytest.mark.clause("BE-8")
def test_extra_info_positional_in_batch_get_v2_is_outside_every_record():
    shape = shape_of("batch_get_v2", ([_trailing(["k1"])], None), {})
    for record in _records():
        assert any("batch_get_v2: extra_info positional" in line for line in violations([shape], record))
    assert not violations([shape_of("batch_get_v2", ([],), {"extra_info": None})], _union_of_forms(_records()))


@pytest.mark.clause("HYB-7", "BE-22")
def test_the_records_are_what_the_wheels_give():
    for version in SGLANG_RELEASES:
        try:
            fetch_release(version)
        except ReleaseError as error:
            reason = f"cannot fetch SGLang {version}'s wheel: {error}"
            if os.environ.get("HICACHE_REQUIRE_SGLANG", "") == "1":
                pytest.fail(reason, pytrace=False)
            pytest.skip(reason)
    done = subprocess.run(
        [sys.executable, "-m", "hicache_contracts.conformance.session.call_shapes", "--check", str(RECORDS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.clause("BE-8")
def test_the_extra_info_forms_are_the_records():
    """hicache_spec.call_forms (what BE-8 asks) says, per method and release, what the wheels' records say."""
    from hicache_spec.call_forms import EXTRA_INFO_FORMS, extra_info_forms

    for record in _records():
        recorded: dict[str, set] = {}
        for call in record["calls"]:
            if call["extra_info"] is not None:
                recorded.setdefault(call["method"], set()).add(call["extra_info"])
        assert recorded.keys() == EXTRA_INFO_FORMS.keys(), record["release"]
        for method, forms in recorded.items():
            assert set(extra_info_forms(method, record["release"])) == forms, (record["release"], method)


def test_the_vendor_guide_shows_the_stored_call_shapes() -> None:
    """docs/vendor-calls.md's generated block is the render of docs/call-shapes (regenerate with
    ``python -m hicache_contracts.conformance.session.call_shapes --markdown docs/vendor-calls.md``)."""
    from hicache_contracts.conformance.session.call_shapes import render_markdown, stored_records, with_rendered_block

    docs = Path(__file__).resolve().parents[3] / "docs"
    guide = (docs / "vendor-calls.md").read_text(encoding="utf-8")
    fresh = render_markdown(stored_records(docs / "call-shapes"))
    assert guide == with_rendered_block(guide, fresh), "docs/vendor-calls.md's call shapes are stale"
    stale = guide.replace("| `batch_get_v1` | `HiCacheController._page_get_zero_copy` |", "| `batch_get_v1` | `x` |")
    assert stale != with_rendered_block(stale, fresh)
    with pytest.raises(ValueError, match="markers"):
        with_rendered_block("no markers here", fresh)
