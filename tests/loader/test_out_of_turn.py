"""The samplers' gate of ordered delivery: in turn at once, out of turn within its bytes, never a deadlock."""

from __future__ import annotations

import asyncio
import random

import pytest
from conftest import run

from outre_async.loader._batch_memory import BatchMemory, MatrixLease
from outre_async.loader._out_of_turn import OutOfTurnMemory


def test_in_turn_passes_without_bytes_and_out_of_turn_within_the_budget() -> None:
    async def body() -> None:
        gate = OutOfTurnMemory(100, 10)
        assert await gate.admit(0, 50) is None  # in turn: its extractor reserves from the pool, however large
        ahead = await gate.admit(1, 6)  # out of turn: batch 0 is not on the channel yet
        assert ahead is not None and gate.used == 60
        over = asyncio.ensure_future(gate.admit(2, 5))  # 60 + 50 > 100: waits ...
        small = asyncio.ensure_future(gate.admit(3, 1))  # would fit, but batch 2 goes first
        await asyncio.sleep(0)
        assert not over.done() and not small.done()
        gate.sent(0)  # batch 1 is now in turn, but it was sent already (out of turn)
        gate.sent(1)  # ... so batch 2 is in turn: it passes without bytes
        assert await over is None
        small_lease = await small
        assert small_lease is not None and gate.used == 70
        ahead.release()
        small_lease.release()
        assert gate.used == 0 and gate.turn == 2
        s = gate.stats()
        assert (s["in_turn"], s["out_of_turn"], s["turn_waits"], s["peak"]) == (2, 2, 2, 70)

    run(body(), timeout=10)


def test_a_batch_larger_than_the_budget_waits_for_its_turn() -> None:
    async def body() -> None:
        gate = OutOfTurnMemory(0, 10)  # a budget of nothing: every batch is sent in plan order
        later = asyncio.ensure_future(gate.admit(1, 1))
        await asyncio.sleep(0)
        assert not later.done()
        assert await gate.admit(0, 1) is None
        await asyncio.sleep(0)
        assert not later.done()  # batch 0 is in turn but not sent yet
        gate.sent(0)
        assert await later is None and gate.stats()["peak"] == 0

    run(body(), timeout=10)


def test_a_cancelled_admission_takes_nothing() -> None:
    async def body() -> None:
        gate = OutOfTurnMemory(100, 10)
        held = await gate.admit(1, 10)
        assert held is not None
        waiting = asyncio.ensure_future(gate.admit(2, 5))
        behind = asyncio.ensure_future(gate.admit(3, 1))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not behind.done()  # lowest first: batch 3 waits behind nothing now, but 100 + 10 > 100
        held.release()
        lease = await behind
        assert lease is not None
        raced = asyncio.ensure_future(gate.admit(4, 10))
        await asyncio.sleep(0)
        lease.release()  # grants the waiter its bytes ...
        raced.cancel()  # ... which is cancelled before it resumes: it must give them back
        with pytest.raises(asyncio.CancelledError):
            await raced
        assert gate.used == 0 and gate.stats()["waiting"] == 0

    run(body(), timeout=10)


def test_the_gate_is_not_a_pool() -> None:
    with pytest.raises(TypeError, match="admit"):
        asyncio.run(OutOfTurnMemory(100, 10).reserve(1, 0))


@pytest.mark.parametrize("budget", [0, 7, 40])
@pytest.mark.parametrize("seed", range(6))
def test_in_plan_order_through_the_gate_and_a_tight_pool_never_hangs(budget: int, seed: int) -> None:
    """The pipeline's waits in miniature, with seeded random delays: samplers take batches in plan
    order, pass the gate, send on a FIFO of capacity 2; extractors reserve in-turn batches' matrices
    from a pool of two batches; the consumer takes batches in plan order and lets each go only when the
    next is in hand.  Every batch arrives once, in order, and neither part ever exceeds its capacity."""
    batches, rng = 60, random.Random(seed)
    rows = [rng.randint(1, 4) for _ in range(batches)]

    async def body() -> list[int]:
        gate, pool = OutOfTurnMemory(budget, 10), BatchMemory(80, 10, budget=80)
        plan = iter(range(batches))
        channel: asyncio.Queue[tuple[int, MatrixLease | None]] = asyncio.Queue(2)
        done: dict[int, MatrixLease] = {}
        arrived = asyncio.Event()

        async def sampler() -> None:
            for seq in plan:
                await asyncio.sleep(rng.random() * 2e-3)
                lease = await gate.admit(seq, rows[seq])
                await channel.put((seq, lease))
                gate.sent(seq)

        async def extractor() -> None:
            while True:
                seq, lease = await channel.get()
                if lease is None:
                    lease = await pool.reserve(rows[seq], seq)
                await asyncio.sleep(rng.random() * 2e-3)
                done[seq] = lease
                arrived.set()

        async def consumer() -> list[int]:
            order, held = [], None
            for seq in range(batches):
                while seq not in done:
                    arrived.clear()
                    await arrived.wait()
                if held is not None:  # as the delivery does: the previous batch goes once the next is in hand
                    held.release()
                held = done.pop(seq)
                held.hand_over()
                order.append(seq)
                await asyncio.sleep(rng.random() * 1e-3)
            assert held is not None
            held.release()
            return order

        async with asyncio.TaskGroup() as tg:
            workers = [tg.create_task(sampler()) for _ in range(3)] + [tg.create_task(extractor()) for _ in range(2)]
            order = await consumer()
            for w in workers:
                w.cancel()
        assert gate.stats()["peak"] <= budget and pool.stats()["peak"] <= 80
        assert gate.used == pool.used == 0
        return order

    assert run(body(), timeout=30) == list(range(batches))
