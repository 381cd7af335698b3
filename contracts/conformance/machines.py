"""Letting go of the state machine classes a run made, so repeated in-process runs hold memory flat.

The stateful check builds a ``RuleBasedStateMachine`` class per run, bound
to the run's context (and through it every instance, pool and page the run
made). Hypothesis keeps such classes for good: a per-class setup table
(``RuleBasedStateMachine._setup_state_per_class``, never emptied), two
``lru_cache``s keyed by the class (128 entries each) and its strategy cache
(1024 strategies, among them the ``sampled_from`` of the class's rules). Ten runs in one
process then held ten contexts, some 75 MB each.

``forget_state_machines(known)`` removes from those tables every machine
class not in ``known`` (taken with ``state_machines()`` before the run) and
clears the caches, which only save recomputing a rule table or a strategy.
"""

from __future__ import annotations

from typing import Any

__all__ = ["forget_state_machines", "state_machines"]


def _tables() -> Any:
    try:
        from hypothesis import stateful
    except ImportError:  # no hypothesis, no machine
        return None
    return stateful


def state_machines() -> frozenset[str]:
    """Return the machine classes hypothesis holds now."""
    stateful = _tables()
    if stateful is None:
        return frozenset()
    return frozenset(getattr(stateful.RuleBasedStateMachine, "_setup_state_per_class", {}))


def forget_state_machines(known: frozenset[str]) -> None:
    """Drop every machine class not in ``known`` from hypothesis' tables, and clear its per-class caches."""
    stateful = _tables()
    if stateful is None:
        return
    table = getattr(stateful.RuleBasedStateMachine, "_setup_state_per_class", None)
    if isinstance(table, dict):
        for machine in [machine for machine in table if machine not in known]:
            table.pop(machine, None)
    for owner, name in ((stateful.RuleBasedStateMachine, "_to_test_case"), (stateful.RuleStrategy, "_setup_for")):
        cached = getattr(owner, name, None)
        clear = getattr(getattr(cached, "__func__", cached), "cache_clear", None)
        if callable(clear):
            clear()
    try:  # strategies are cached too (1024 of them), and a sampled_from of rules holds the class
        from hypothesis.strategies._internal.utils import clear_strategy_cache
    except ImportError:
        return
    clear_strategy_cache()
