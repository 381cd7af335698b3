"""The linker suite's checks: one function per check, each naming the clause it judges.

A check builds the linkers it needs through the run's factory (each with a
store of its own), drives them through the run's driver and raises
``CheckFailed`` with what it saw, or ``CheckSkipped`` with why it could not run.
Device slots are compared byte for byte on the CPU pools the setup holds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch

from hicache_spec import KV, TRAILING_PAGES
from hicache_contracts.models import PoolName
from hicache_contracts.linker.harness import Driver, LinkerSetup, make_transfer, new_keys
from hicache_spec.linker import judge_lookup, linker_restorable_lengths
from hicache_spec.releases import release_key

__all__ = ["CHECKS", "Check", "CheckFailed", "CheckSkipped", "Context"]

PAGE = 4
"""Slots per page in the suite's pools."""


class CheckFailed(AssertionError):
    """The linker broke the check's clause; the message says how."""


class CheckSkipped(Exception):
    """The check could not run; the message says why."""


@dataclass
class Context:
    """What a check gets: a way to build linkers and a driver per linker."""

    setup: LinkerSetup
    build: Callable[[LinkerSetup], Any]
    drive: Callable[[Any], Driver]
    release: str
    built: list[Any]

    def linker(self, **changes: Any) -> tuple[Any, Driver]:
        setup = self.setup.but(**changes) if changes else self.setup
        linker = self.build(setup)
        self.built.append(linker)
        return linker, self.drive(linker)


def slots(first_page: int, pages: int) -> torch.Tensor:
    return torch.arange(first_page * PAGE, (first_page + pages) * PAGE, dtype=torch.int64)


def kv(keys: list[str], first_page: int | None = None) -> Any:
    return make_transfer(KV, keys, None if first_page is None else slots(first_page, len(keys)))


def swa(keys: list[str], first_page: int | None = None) -> Any:
    indices = None if first_page is None else slots(first_page, len(keys))
    return make_transfer("swa", keys, indices, TRAILING_PAGES)


def store(driver: Driver, *transfers: Any) -> None:
    """Offload ``transfers`` as one offload and require its success."""
    if not driver.offload(list(transfers)):
        raise CheckFailed("offload of valid pages returned False")
    results = driver.offload_results(1)
    if results != [True]:
        raise CheckFailed(f"offload of valid pages reported {results}")


def page_bytes(setup: LinkerSetup, pool: str, first_page: int, pages: int) -> list[torch.Tensor]:
    index = slots(first_page, pages)
    return [buffer[index].clone() for layer in setup.pools[pool].layers for buffer in layer]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def snapshot(setup: LinkerSetup) -> list[torch.Tensor]:
    return [t for pool in setup.pools.values() for t in pool.snapshot()]


# ---------------------------------------------------------------- checks


def check_counter(ctx: Context) -> None:
    """LNK-5: layer_done_counter has set_consumer and wait_until; an index with no batch returns at once."""
    linker, _ = ctx.linker()
    counter: Any = getattr(linker, "layer_done_counter", None)
    for name in ("set_consumer", "wait_until"):
        if not callable(getattr(counter, name, None)):
            raise CheckFailed(f"layer_done_counter has no {name}()")
    done = threading.Event()

    def wait() -> None:
        counter.set_consumer(12345)
        counter.wait_until(0)
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    if not done.wait(2):
        raise CheckFailed("wait_until(0) for an index with no batch did not return")


def check_pools(ctx: Context) -> None:
    """LNK-6: for a cache with an SWA component, pools answers whether it holds the SWA pool (the one question the
    0.5.23 wrapper asks of it, at construction)."""
    linker, _ = ctx.linker()
    if "swa" not in ctx.setup.pools:
        return  # the wrapper never reads pools for a cache without SWA
    if not hasattr(linker, "pools"):
        raise CheckFailed(
            "the linker has no pools attribute: for a cache with an SWA component the wrapper asks whether pools "
            "holds PoolName.SWA when it is built, and the attach fails with AttributeError"
        )
    try:
        PoolName.SWA in linker.pools  # noqa: B015  (the membership test itself is what is checked)
    except Exception as error:
        raise CheckFailed(
            f"PoolName.SWA in pools raised {type(error).__name__}: {error} (pools is {type(linker.pools).__name__})"
        ) from error


def check_lookup(ctx: Context) -> None:
    """LNK-7: lookup reports exactly the restorable set, KV alone and with a TRAILING_PAGES SWA window."""
    _, driver = ctx.linker()
    tail = new_keys(8)
    # KV pages 0..5 and 7 stored (6 missing); SWA pages 1, 3, 4 and 5 stored.
    store(driver, kv(tail[:6], 0))
    store(driver, kv(tail[7:8], 7))
    has_swa = "swa" in ctx.setup.pools  # a linker without SWA pages is asked about KV alone (LNK-6)
    for page in (1, 3, 4, 5) if has_swa else ():
        store(driver, swa(tail[page : page + 1], 10 + page))
    kv_present = tuple(i != 6 for i in range(8))
    swa_present = tuple(i in (1, 3, 4, 5) for i in range(8))
    cases = [
        ("KV alone", [kv(tail)], ()),
        ("KV + SWA window 2", [kv(tail), swa(tail[-2:])], (("swa", TRAILING_PAGES, 2, swa_present),)),
        ("KV + SWA window 1", [kv(tail), swa(tail[-1:])], (("swa", TRAILING_PAGES, 1, swa_present),)),
        ("KV prefix of 4", [kv(tail[:4])], ()),
    ]
    if not has_swa:
        cases = [case for case in cases if not case[2]]
    for label, transfers, queries in cases:
        length = len(transfers[0].keys)
        expected = linker_restorable_lengths(
            kv_present[:length], tuple((n, p, w, f[:length]) for n, p, w, f in queries)
        )
        reported = driver.lookup("rid-lookup", transfers)
        extra, missing = judge_lookup(tuple(reported), expected, length)
        if extra or missing:
            raise CheckFailed(
                f"{label}: lookup reported {sorted(set(reported))}, restorable {list(expected)} "
                f"(not restorable: {list(extra)}; left out: {list(missing)})"
            )
        agreed = driver.agree([reported], length)
        if agreed != (expected[-1] if expected else 0):
            raise CheckFailed(f"{label}: the engine agreed on {agreed} pages from {reported}")


def check_torn_offload(ctx: Context) -> None:
    """LNK-8: a page an offload could not read whole is never counted by lookup."""
    _, driver = ctx.linker()
    tail = new_keys(3)
    short = slots(20, 3)[: 2 * PAGE + PAGE // 2]  # the third page has half its slots
    queued = driver.offload([make_transfer(KV, tail, short)])
    if queued:
        driver.offload_results(1)
    reported = driver.lookup("rid-torn", [kv(tail)])
    if 3 in reported:
        raise CheckFailed(f"lookup reported 3 pages after an offload whose third page was half there: {reported}")


def check_lazy_load(ctx: Context) -> None:
    """LNK-9: load only queues: the target slots are unchanged until start_layer_wise_loading."""
    _, driver = ctx.linker()
    keys = new_keys(2)
    store(driver, kv(keys, 0))
    before = page_bytes(ctx.setup, KV, 8, 2)
    if not driver.load("rid-lazy", [kv(keys, 8)]):
        raise CheckFailed("load of stored pages returned False")
    time.sleep(0.05)
    if not same(before, page_bytes(ctx.setup, KV, 8, 2)):
        raise CheckFailed("load wrote the target slots before start_layer_wise_loading")
    index = driver.start()
    driver.finish(index)
    if not same(page_bytes(ctx.setup, KV, 0, 2), page_bytes(ctx.setup, KV, 8, 2)):
        raise CheckFailed("the started load did not land")


def check_load_refusals(ctx: Context) -> None:
    """LNK-10: a queued rid is refused; a load of a subset of the pools is accepted and lands: SWA alone where the
    release drops the pools already resident (0.5.20-0.5.21), KV alone (without its SWA window) from 0.5.22."""
    _, driver = ctx.linker()
    keys = new_keys(2)
    has_swa = "swa" in ctx.setup.pools
    swa_alone = release_key(ctx.release) < release_key("0.5.22")
    store(driver, kv(keys, 0), *([swa(keys[-1:], 3)] if has_swa else []))
    if not driver.load("rid-dup", [kv(keys, 8)]):
        raise CheckFailed("load of stored pages returned False")
    try:
        again = driver.load("rid-dup", [kv(keys, 12)])
    except Exception:
        again = False
    if again:
        raise CheckFailed("a second load of a queued rid returned True")
    if has_swa and swa_alone and not driver.load("rid-swa-only", [swa(keys[-1:], 20)]):
        raise CheckFailed("an SWA-only load (partial transfers) returned False")
    index = driver.start()
    if not driver.finish(index):
        raise CheckFailed("the batch of valid loads did not land")
    if has_swa and swa_alone and not same(page_bytes(ctx.setup, "swa", 3, 1), page_bytes(ctx.setup, "swa", 20, 1)):
        raise CheckFailed("the SWA-only load did not land")
    if not same(page_bytes(ctx.setup, KV, 0, 2), page_bytes(ctx.setup, KV, 8, 2)):
        raise CheckFailed("the first load of the rid did not land (KV alone, without its SWA window)")
    guard = page_bytes(ctx.setup, KV, 12, 2)
    if same(guard, page_bytes(ctx.setup, KV, 0, 2)):
        raise CheckFailed("the refused second load of the rid wrote its slots")


def check_start_indices(ctx: Context) -> None:
    """LNK-11: nothing queued -> an index whose wait returns at once, negative from 0.5.23 (which reads a negative
    index as no load); the index a batch starts as is at least 0 and stands for that batch: after an earlier batch
    was waited on and finished (SGLang finishes a batch before it starts the next, so an index may come back),
    waiting on the new index waits until this batch's bytes have landed."""
    _, driver = ctx.linker()
    empty = driver.start()
    if empty >= 0 and release_key(ctx.release) >= release_key("0.5.23"):
        raise CheckFailed(f"start_layer_wise_loading with nothing queued returned {empty}: 0.5.23 reads it as a load")
    if empty >= 0:  # before 0.5.23 the index only reaches the counter's wait, which must then return at once
        raised: list[BaseException] = []

        def wait() -> None:
            try:
                driver.wait_layers(empty)
            except BaseException as error:  # the forward's wait raising ends the scheduler: recorded, judged below
                raised.append(error)

        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        waiter.join(driver.timeout)
        if waiter.is_alive() or raised:
            how = f"raised {raised[0]!r}" if raised else "never ends"
            raise CheckFailed(f"start_layer_wise_loading with nothing queued returned {empty}, whose wait {how}")
    keys = new_keys(1)
    store(driver, kv(keys, 0))
    for batch in range(2):
        _scribble(ctx.setup, 8 + batch, 1)
        if not driver.load(f"rid-index-{batch}", [kv(keys, 8 + batch)]):
            raise CheckFailed("load of a stored page returned False")
        index = driver.start()
        if index < 0:
            raise CheckFailed(f"a batch with a queued load started as {index}")
        driver.wait_layers(index)
        landed = same(page_bytes(ctx.setup, KV, 0, 1), page_bytes(ctx.setup, KV, 8 + batch, 1))
        driver.finish(index)
        if not landed:
            raise CheckFailed(
                f"batch {batch + 1} started as index {index}, but waiting on every layer of that index returned "
                "before its bytes landed: the index does not stand for the batch"
            )


def check_round_trip(ctx: Context) -> None:
    """LNK-12: every layer's bytes land in the target slots exactly; no other slot changes."""
    _, driver = ctx.linker()
    keys = new_keys(3)
    has_swa = "swa" in ctx.setup.pools
    store(driver, kv(keys, 0), *([swa(keys[-1:], 5)] if has_swa else []))
    before = snapshot(ctx.setup)
    if not driver.load("rid-trip", [kv(keys, 16)] + ([swa(keys[-1:], 24)] if has_swa else [])):
        raise CheckFailed("load of stored pages returned False")
    index = driver.start()
    driver.wait_layers(index)
    if not driver.finish(index):
        raise CheckFailed("the load of stored pages did not land")
    if not same(page_bytes(ctx.setup, KV, 0, 3), page_bytes(ctx.setup, KV, 16, 3)):
        raise CheckFailed("the KV slots do not hold the stored bytes")
    if has_swa and not same(page_bytes(ctx.setup, "swa", 5, 1), page_bytes(ctx.setup, "swa", 24, 1)):
        raise CheckFailed("the SWA slots do not hold the stored bytes")
    after = snapshot(ctx.setup)
    targets = {KV: set(range(16 * PAGE, 19 * PAGE)), "swa": set(range(24 * PAGE, 25 * PAGE))}
    position = 0
    for name, pool in ctx.setup.pools.items():
        for _ in range(sum(len(layer) for layer in pool.layers)):
            changed = (before[position] != after[position]).reshape(before[position].shape[0], -1).any(dim=1)
            stray = sorted(set(changed.nonzero().flatten().tolist()) - targets.get(name, set()))
            if stray:
                raise CheckFailed(f"pool {name}: slots {stray[:8]} outside the load's targets changed")
            position += 1


def check_failed_load(ctx: Context) -> None:
    """LNK-13: a load of pages the store lacks ends with finish returning False; nothing raises."""
    _, driver = ctx.linker()
    keys = new_keys(2)
    if not driver.load("rid-missing", [kv(keys, 8)]):
        raise CheckSkipped("the linker refused to queue pages it does not hold, so no load failed")
    index = driver.start()
    try:
        driver.wait_layers(index)
    except Exception as error:
        raise CheckFailed(f"layer_done_counter.wait_until raised on a failed load: {error!r}") from None
    try:
        landed = driver.finish(index)
    except Exception as error:
        raise CheckFailed(f"finish_layer_wise_loading raised on a failed load: {error!r}") from None
    if landed:
        raise CheckFailed("finish_layer_wise_loading returned True for pages the store does not hold")


def check_completed_loads(ctx: Context) -> None:
    """LNK-14: each started batch is reported once, in start order, with its rids, after it stopped."""
    linker, driver = ctx.linker()
    keys = new_keys(2)
    store(driver, kv(keys, 0))
    order = []
    for batch in range(2):
        rid = f"rid-batch-{batch}"
        if not driver.load(rid, [kv(keys, 8 + 2 * batch)]):
            raise CheckFailed("load of stored pages returned False")
        order.append((driver.start(), [rid]))
    deadline = time.monotonic() + 10
    while linker.num_completed_loads() < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    if linker.num_completed_loads() != 2:
        raise CheckFailed(f"num_completed_loads is {linker.num_completed_loads()} after two batches")
    popped = [list(linker.pop_completed_load()) for _ in range(2)]
    if popped != [rids for _, rids in order]:
        raise CheckFailed(f"pop_completed_load gave {popped}; batches started as {order}")
    if not same(page_bytes(ctx.setup, KV, 0, 2), page_bytes(ctx.setup, KV, 10, 2)):
        raise CheckFailed("a batch was reported before its slots were written")
    time.sleep(0.02)
    if linker.num_completed_loads() != 0:
        raise CheckFailed("a batch was reported twice")


def check_cancel(ctx: Context) -> Optional[str]:
    """LNK-15: True only for a queued, unstarted load, which then never writes; False for a started one, and, where
    the release asks about every released request (0.5.20-0.5.21), for a cancelled or unknown rid.

    Declining a queued load (False) is allowed: the load then runs like any other.
    """
    _, driver = ctx.linker()
    asks_every_request = release_key(ctx.release) < release_key("0.5.22")  # 0.5.22+ ask only of rids in flight
    keys = new_keys(2)
    store(driver, kv(keys, 0))
    if asks_every_request and driver.cancel("rid-unknown"):
        raise CheckFailed("cancel_queued_load of a rid never loaded returned True")
    if not driver.load("rid-cancel", [kv(keys, 8)]):
        raise CheckFailed("load of stored pages returned False")
    cancelled = driver.cancel("rid-cancel")
    after_cancel = page_bytes(ctx.setup, KV, 8, 2)
    if asks_every_request and cancelled and driver.cancel("rid-cancel"):
        raise CheckFailed("a second cancel_queued_load of the same rid returned True")
    if not driver.load("rid-started", [kv(keys, 12)]):
        raise CheckFailed("load of stored pages returned False")
    index = driver.start()
    if driver.cancel("rid-started"):
        raise CheckFailed("cancel_queued_load of a started load returned True")
    driver.finish(index)
    if cancelled and not same(after_cancel, page_bytes(ctx.setup, KV, 8, 2)):
        raise CheckFailed("the cancelled load wrote its slots")
    return None if cancelled else "cancel_queued_load declined a queued load (allowed: the load then ran)"


def check_offload_results(ctx: Context) -> None:
    """LNK-16: one result per accepted offload, in submission order, True only when all its pages were written."""
    _, driver = ctx.linker()
    bad = torch.arange(10_000, 10_000 + 2 * PAGE, dtype=torch.int64)  # slots outside every pool
    plan = [True, False, False, True, True, True]
    for ok in plan:
        keys = new_keys(2)
        transfers = [kv(keys, 0) if ok else make_transfer(KV, keys, bad)]
        if not driver.offload(transfers):
            raise CheckFailed("offload returned False for transfers it could try")
    if driver.offload([make_transfer(KV, [], slots(0, 0))]):
        raise CheckFailed("offload of a transfer with no keys returned True")
    results = driver.offload_results(len(plan))
    if results != plan:
        raise CheckFailed(f"offload results {results}; submitted offloads would give {plan}")
    time.sleep(0.02)
    extra = driver.linker.num_completed_offloads()
    if extra:
        raise CheckFailed(f"{extra} result(s) more than offloads accepted")


def _busy(ctx: Context, driver: Driver, pages: int = 24) -> None:
    """Queue a batch of loads and offloads and start the loads, without waiting for either."""
    keys = new_keys(pages)
    store(driver, kv(keys[:pages], 0))
    driver.load("rid-busy", [kv(keys[:pages], pages)])
    driver.start()
    for _ in range(4):
        driver.offload([kv(new_keys(pages), 0)])


def _stop_while_busy(ctx: Context, stop: str) -> tuple[Any, Driver]:
    """Make the linker busy, call ``stop`` (``reset`` or ``close``) on it, then fail if device slots still change."""
    linker, driver = ctx.linker()
    _busy(ctx, driver)
    getattr(driver, stop)()
    first = snapshot(ctx.setup)
    time.sleep(0.3)
    if not same(first, snapshot(ctx.setup)):
        raise CheckFailed(f"device slots changed after {stop}() returned")
    return linker, driver


def check_reset(ctx: Context) -> None:
    """LNK-17: after reset() nothing begun before it writes; results are dropped; the linker stays usable."""
    linker, driver = _stop_while_busy(ctx, "reset")
    if linker.num_completed_offloads():
        raise CheckFailed("offload results from before reset() are still reported")
    keys = new_keys(1)
    store(driver, kv(keys, 0))
    if not driver.load("rid-after-reset", [kv(keys, 30)]):
        raise CheckFailed("load after reset() returned False")
    if not driver.finish(driver.start()):
        raise CheckFailed("a load after reset() did not land")


def check_close(ctx: Context) -> None:
    """LNK-18: after close() no load or offload writes device memory."""
    _stop_while_busy(ctx, "close")


def check_idempotent(ctx: Context) -> None:
    """LNK-19: reset twice, close after reset, close twice: no exception."""
    linker, _ = ctx.linker()
    for step in ("reset", "reset", "close", "close"):
        try:
            getattr(linker, step)()
        except Exception as error:
            raise CheckFailed(f"{step}() raised after reset/close: {error!r}") from None


def check_non_owner(ctx: Context) -> None:
    """LNK-20: a non-owner rank of replicated pools reports True and writes nothing."""
    _, owner = ctx.linker(rank_replicated=True, tp_rank=0, tp_size=2)
    _, peer = ctx.linker(rank_replicated=True, tp_rank=1, tp_size=2)
    keys = new_keys(2)
    if not peer.offload([kv(keys, 0)]):
        raise CheckFailed("a non-owner rank's offload returned False")
    if peer.offload_results(1) != [True]:
        raise CheckFailed("a non-owner rank's offload did not report True")
    time.sleep(0.05)
    found = owner.lookup("rid-owner", [kv(keys)])
    if found:
        raise CheckFailed(f"the owner found {found} pages a non-owner rank offloaded: the non-owner wrote")


def check_namespacing(ctx: Context) -> Optional[str]:
    """LNK-21: pages are kept apart per model and rank coordinate; replicated pools are shared across TP."""
    _, writer = ctx.linker()
    keys = new_keys(2)
    store(writer, kv(keys, 0))
    others: dict[str, dict[str, Any]] = {
        "another model": {"model_name": ctx.setup.model_name + "-other"},
        "TP rank 1": {"tp_rank": 1, "tp_size": 2},
        "CP rank 1": {"cp_rank": 1},
        "PP rank 1": {"pp_rank": 1},
    }
    left_out = []
    for label, changes in others.items():
        try:
            _, reader = ctx.linker(**changes)
        except CheckSkipped as why:
            left_out.append(f"{label} ({why})")
            continue
        found = reader.lookup("rid-ns", [kv(keys)])
        if found:
            raise CheckFailed(f"{label} found {found} pages of model/rank (tp0, cp0, pp0)")
    _, same_rank = ctx.linker()
    if not same_rank.lookup("rid-ns", [kv(keys)]):
        raise CheckFailed("a second linker of the same model and rank found none of the pages")
    try:
        _, owner = ctx.linker(rank_replicated=True, tp_rank=0, tp_size=2)
        _, peer = ctx.linker(rank_replicated=True, tp_rank=1, tp_size=2)
    except CheckSkipped as why:
        left_out.append(f"replicated TP ranks ({why})")
    else:
        shared = new_keys(2)
        store(owner, kv(shared, 0))
        if 2 not in peer.lookup("rid-ns", [kv(shared)]):
            raise CheckFailed("TP rank 1 of replicated pools does not find the owner's pages")
    if len(left_out) == len(others) + 1:
        raise CheckSkipped(f"no other coordinate could be built: {'; '.join(left_out)}")
    return f"not built, so not checked: {'; '.join(left_out)}" if left_out else None


CONCURRENT_CHAINS = 32
"""Offloads (of 8 pages each) queued at once while lookups run (LNK-24)."""


def _scribble(setup: LinkerSetup, first_page: int, pages: int) -> None:
    """Flip every byte of those KV slots, so that a load that does not land there shows."""
    index = slots(first_page, pages)
    for layer in setup.pools[KV].layers:
        for buffer in layer:
            buffer[index] = buffer[index] ^ 0xFF


def _lookup_during(driver: Driver, keys: list[str], what: str) -> list[int]:
    try:
        reported = driver.lookup("rid-during", [kv(keys)])
    except Exception as error:
        raise CheckFailed(f"lookup raised {error!r} while {what}") from None
    if not all(isinstance(n, int) for n in reported):
        raise CheckFailed(f"lookup returned {reported!r} while {what}, not a list of ints")
    return reported


def check_lookup_during_transfers(ctx: Context) -> str:
    """LNK-24: lookups on the caller's thread while a load and many offloads run on the linker's threads.

    A chain stored before must be reported whole at every moment; a chain still being offloaded may be
    reported in part (1..k, pages stored whole), and each length reported is loaded at once and must
    land byte for byte; nothing raises and every offload still reports success.
    """
    linker, driver = ctx.linker()
    stored = new_keys(8)
    store(driver, kv(stored, 0))
    source = page_bytes(ctx.setup, KV, 0, 8)
    whole = list(range(1, 9))
    if not driver.load("rid-background", [kv(stored, 24)]):
        raise CheckFailed("load of stored pages returned False")
    background = driver.start()
    chains = [new_keys(8) for _ in range(CONCURRENT_CHAINS)]
    for chain in chains:
        if not driver.offload([kv(chain, 0)]):
            raise CheckFailed("offload of valid pages returned False")
    what = f"a load and {len(chains)} offloads ran"
    reported = _lookup_during(driver, stored, what)
    if sorted(set(reported)) != whole:
        raise CheckFailed(f"lookup of 8 pages stored before reported {sorted(set(reported))} while {what}")
    if not driver.finish(background):
        raise CheckFailed(f"a load of stored pages did not land while {what}")
    deadline = time.monotonic() + driver.timeout
    probe = overlapped = partial = 0
    while time.monotonic() < deadline:
        settled = linker.num_completed_offloads() >= len(chains)
        overlapped += not settled
        reported = _lookup_during(driver, stored, what)
        if sorted(set(reported)) != whole:
            raise CheckFailed(f"lookup of 8 pages stored before reported {sorted(set(reported))} while {what}")
        done = linker.num_completed_offloads()  # the chain the offload thread is most likely writing now
        chain = chains[probe % len(chains)] if settled else chains[min(done, len(chains) - 1)]
        found = sorted({n for n in _lookup_during(driver, chain, what) if 1 <= n <= len(chain)})
        if found and found != list(range(1, found[-1] + 1)):
            raise CheckFailed(f"lookup of a chain being offloaded reported {found}: not every length up to its largest")
        if found:
            length = found[-1]
            partial += not settled and length < len(chain)
            pages = f"{length} page{'s' if length != 1 else ''}"
            _scribble(ctx.setup, 40, length)
            if not driver.load(f"rid-probe-{probe}", [kv(chain[:length], 40)]):
                raise CheckFailed(f"lookup reported {pages} of an offload in flight; a load of them was refused")
            if not driver.finish(driver.start()):
                raise CheckFailed(
                    f"lookup reported {pages} of an offload in flight; a load of them started at once failed"
                )
            if not same(page_bytes(ctx.setup, KV, 40, length), [t[: length * PAGE] for t in source]):
                raise CheckFailed(
                    f"lookup reported {pages} of an offload in flight; a load of them started at once "
                    "wrote other bytes than were offloaded"
                )
        probe += 1
        if settled and probe >= len(chains):
            break
    results = driver.offload_results(len(chains))
    if not all(results):
        raise CheckFailed(f"{results.count(False)} of {len(chains)} offloads of valid pages failed while lookups ran")
    return f"{overlapped} lookup rounds ran while offloads were in flight; {partial} found a chain in part"


@dataclass(frozen=True)
class Check:
    name: str
    clause: str
    run: Callable[[Context], Optional[str]]
    """Raises CheckFailed / CheckSkipped, or returns None or a note on what it could not cover."""


CHECKS: tuple[Check, ...] = (
    Check("layer_done_counter", "LNK-5", check_counter),
    Check("pools_attribute", "LNK-6", check_pools),
    Check("lookup_restorable_set", "LNK-7", check_lookup),
    Check("lookup_never_counts_torn_pages", "LNK-8", check_torn_offload),
    Check("load_only_queues", "LNK-9", check_lazy_load),
    Check("load_refusals_and_partial", "LNK-10", check_load_refusals),
    Check("start_indices", "LNK-11", check_start_indices),
    Check("round_trip_byte_exact", "LNK-12", check_round_trip),
    Check("failed_load_reported_not_raised", "LNK-13", check_failed_load),
    Check("completed_loads_in_order", "LNK-14", check_completed_loads),
    Check("cancel_only_queued", "LNK-15", check_cancel),
    Check("offload_results_in_order", "LNK-16", check_offload_results),
    Check("reset_quiesces", "LNK-17", check_reset),
    Check("close_quiesces", "LNK-18", check_close),
    Check("reset_close_idempotent", "LNK-19", check_idempotent),
    Check("non_owner_rank_writes_nothing", "LNK-20", check_non_owner),
    Check("namespacing", "LNK-21", check_namespacing),
    Check("lookup_during_transfers", "LNK-24", check_lookup_during_transfers),
)
"""Every behaviour check, in clause order."""
