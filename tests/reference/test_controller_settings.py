"""ControllerSettings: one home for the controller's options, and the collaborators a variant plugs in.

Bad options (as keywords or as settings) raise a ContractViolation naming
``ControllerSettings.<field>`` and its clause, before the controller touches
the backend or starts a thread. Keywords and settings build the same
controller; both at once is an error. A subclass overriding a step that moved
to a collaborator fails at class creation instead of being silently ignored.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from hicache_contracts import ContractViolation
from hicache_reference import CacheController, ControllerSettings
from hicache_reference.attachment import Attachment
from hicache_reference.hit_query import HitQuery
from hicache_reference.settings import SETTING_NAMES
from hicache_spec import STORAGE_BATCH_SIZE
from tests.reference.controller_helpers import PAGE_SIZE, FaultingRecorder, keys_for, make_pool, memory_backend

BAD = [
    ("batch_size", 0, "must be an int >= 1", "CTL-2"),
    ("batch_size", 2.0, "must be an int >= 1", "CTL-2"),
    ("batch_size", True, "must be an int >= 1", "CTL-2"),
    ("prefetch_threshold", -1, "must be an int >= 0", "CTL-3"),
    ("prefetch_threshold", "256", "must be an int >= 0", "CTL-3"),
    ("prefetch_timeout_base", -0.5, "must be a number >= 0", "CTL-14"),
    ("prefetch_timeout_base", True, "must be a number >= 0", "CTL-14"),
    ("prefetch_timeout_per_ki_token", float("nan"), "must be a number >= 0", "CTL-14"),
    ("prefetch_timeout_max", -1, "must be a number >= 0", "CTL-10"),
    ("pass_prefix_keys", 1, "must be a bool", "PFX-1"),
    ("call_deadline", 0, "must be a finite number of seconds > 0, or None to wait for ever", "CTL-11"),
    ("call_deadline", float("inf"), "must be a finite number of seconds > 0, or None to wait for ever", "CTL-11"),
    ("register_host_pools", "yes", "must be a bool", "BE-24"),
]
GOOD = {
    "batch_size": 4,
    "prefetch_threshold": 0,
    "prefetch_timeout_base": 2,
    "prefetch_timeout_per_ki_token": 0.5,
    "prefetch_timeout_max": 3.0,
    "pass_prefix_keys": True,
    "call_deadline": None,
    "register_host_pools": False,
}


class Untouched:
    """A backend that records every attribute asked for: a rejected controller must ask for none."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __getattr__(self, name: str):
        self.asked.append(name)
        raise AttributeError(name)


def test_every_option_is_covered():
    assert set(GOOD) == set(SETTING_NAMES) == {field for field, *_ in BAD}


def rejected(build):
    """Run ``build(backend)``; return the ContractViolation it raised, asserting it touched nothing."""
    backend, before = Untouched(), threading.active_count()
    try:
        controller = build(backend)
    except ContractViolation as violation:
        assert backend.asked == [], f"the backend was asked for {backend.asked} before the check"
        assert threading.active_count() == before, "a thread was started before the check"
        return violation
    controller.close()
    raise AssertionError("accepted")


def check_bad_option(field, value, rule, clause_id):
    violation = rejected(
        lambda backend: CacheController(backend, make_pool(), settings=ControllerSettings(**{field: value}))
    )
    assert str(violation) == f"ControllerSettings.{field}: {rule} (got {value!r}) [{clause_id}]"
    assert (violation.field, violation.clause_id) == (f"ControllerSettings.{field}", clause_id)


@pytest.mark.clause("CTL-2", "CTL-3", "CTL-10", "CTL-11", "CTL-14", "PFX-1", "BE-24")
@pytest.mark.parametrize("field,value,rule,clause_id", BAD, ids=[f"{field}={value!r}" for field, value, *_ in BAD])
def test_a_bad_option_names_its_field_and_touches_nothing(field, value, rule, clause_id):
    check_bad_option(field, value, rule, clause_id)


@pytest.mark.parametrize("name", ["batch", *SETTING_NAMES])
def test_options_are_given_only_through_settings(name):
    with pytest.raises(ContractViolation, match=r"^ControllerSettings.batch: extra inputs are not permitted"):
        ControllerSettings(batch=4)
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'"):
        CacheController(memory_backend(), make_pool(), start=False, **{name: GOOD.get(name, 4)})


def test_settings_are_frozen_and_compare_by_value():
    settings = ControllerSettings(**GOOD)
    with pytest.raises(ValueError):
        settings.batch_size = 8
    assert settings == ControllerSettings.model_validate(settings.model_dump())
    assert settings.prefetch_timeout_base == 2.0 and type(settings.prefetch_timeout_base) is float
    assert ControllerSettings() == ControllerSettings(batch_size=STORAGE_BATCH_SIZE)


def run(controller_class, **options):
    """A backup then a prefetch of 10 pages; return what the backend saw, the acks and the settings."""
    recorder = FaultingRecorder(memory_backend())
    pool = make_pool()
    recorder.register_mem_pool_host(pool)
    with controller_class(recorder, pool, **options) as controller:
        keys = keys_for(10)
        backup = controller.backup(keys, pool.alloc(10), prefix_keys=())
        backup.wait(10)
        operation = controller.prefetch(keys=keys, prefix_keys=())
        operation.wait(10)
    calls = [(call.method, len(call.keys or ()), call.prefix_at_call) for call in recorder.calls]
    return calls, operation.acks, controller.settings


@pytest.mark.clause("CTL-2")
def test_the_settings_given_govern_the_controller():
    calls, acks, settings = run(CacheController, settings=ControllerSettings(**GOOD))
    assert settings == ControllerSettings(**GOOD)
    assert [count for method, count, _ in calls if method == "batch_get_v1"] == [4, 4, 2]  # batch_size 4
    assert acks[-1].tokens == 10 * PAGE_SIZE
    other_calls, _, _ = run(CacheController, settings=ControllerSettings(**{**GOOD, "batch_size": 3}))
    assert [count for method, count, _ in other_calls if method == "batch_get_v1"] == [3, 3, 3, 1]


def test_settings_of_another_type_are_rejected():
    with pytest.raises(ContractViolation, match=r"^CacheController.settings: must be a ControllerSettings"):
        CacheController(Untouched(), make_pool(), settings={"batch_size": 4})


# ---------------------------------------------------------------- collaborators
class HalfQuery(HitQuery):
    """A variant step: the hit query reports half the hit."""

    def query(self, operation):
        return super().query(operation) // 2


def test_with_parts_plugs_a_collaborator_in():
    controller_class = CacheController.with_parts(HalfQuery)
    assert issubclass(controller_class, CacheController) and controller_class.hit_query_class is HalfQuery
    backend, pool = memory_backend(), make_pool()
    backend.register_mem_pool_host(pool)
    keys = keys_for(6)
    with controller_class(
        backend, pool, settings=ControllerSettings(prefetch_threshold=0, register_host_pools=False)
    ) as controller:
        assert isinstance(controller.hit_query, HalfQuery)
        controller.backup(keys, pool.alloc(6)).wait(10)
        operation = controller.prefetch(keys=keys)
        operation.wait(10)
    assert operation.hit_pages == 3


def test_with_parts_rejects_what_is_not_a_part():
    with pytest.raises(TypeError, match="must subclass exactly one of the controller's parts"):
        CacheController.with_parts(dict)
    with pytest.raises(TypeError, match="must subclass exactly one of the controller's parts"):
        CacheController.with_parts(HalfQuery, object)
    with pytest.raises(TypeError, match="give at least one part"):
        CacheController.with_parts()
    named = CacheController.with_parts(HalfQuery, name="Named", doc="A named variant.")
    assert (named.__name__, named.__doc__, named.hit_query_class) == ("Named", "A named variant.", HalfQuery)


class NoBurstEnd(Attachment):
    """Planted: the KV pool is registered, but the burst is never ended (BE-27)."""

    def register_host_pools(self):
        self.backend.register_mem_pool_host(self.host_pool)


def registration_of(controller_class):
    """The registration calls a controller of ``controller_class`` makes at construction."""
    recorder = FaultingRecorder(memory_backend())
    controller_class(recorder, make_pool(), start=False)
    return [name for name, _ in recorder.registered]


@pytest.mark.clause("BE-24", "BE-27")
def test_with_parts_plugs_an_attachment_in():
    assert registration_of(CacheController) == ["register_mem_pool_host", "on_host_pools_registered"]
    assert registration_of(CacheController.with_parts(NoBurstEnd)) == ["register_mem_pool_host"]


def test_the_facade_shows_the_workers_and_their_threads():
    controller = CacheController(memory_backend(), make_pool())
    try:
        threads = controller._threads
        assert threads == controller.workers.threads and len(threads) == 3
        assert all(thread.is_alive() for thread in threads) and controller.running
    finally:
        assert controller.close(timeout=10)
    assert not controller.running and not any(thread.is_alive() for thread in threads)


def test_with_parts_names_and_documents_a_variant_after_its_parts():
    variant = CacheController.with_parts(HalfQuery, NoBurstEnd)
    assert (variant.__name__, variant.__doc__) == ("HalfQueryNoBurstEnd", HalfQuery.__doc__)
    assert (variant.hit_query_class, variant.attachment_class) == (HalfQuery, NoBurstEnd)
    elsewhere = type("ElsewhereAttachment", (Attachment,), {"__module__": "vendor.parts"})
    assert CacheController.with_parts(HalfQuery, elsewhere).__module__ == HalfQuery.__module__  # the first part's


@pytest.mark.clause("CTL-8")
@pytest.mark.parametrize(
    "fields, replicated", [({}, False), ({"is_mla_model": False}, False), ({"is_mla_model": True}, True)]
)
def test_kv_is_replicated_only_when_the_config_says_mla(fields, replicated):
    """A storage config without is_mla_model (an older or a hand-made one) is a model whose KV each TP rank holds."""
    config = SimpleNamespace(tp_rank=0, tp_size=2, **fields)
    assert Attachment(memory_backend(), make_pool(), config, ()).is_replicated_kv is replicated
