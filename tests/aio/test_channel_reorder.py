"""Bounded channels (back-pressure, close, cancellation) and the reorder buffer (property tests)."""

from __future__ import annotations

import asyncio
import random

import pytest
from conftest import run
from hypothesis import given
from hypothesis import strategies as st

from outre_async import ConfigError
from outre_async.errors import PipelineClosed
from outre_async.aio._channel import Channel, EndOfChannel
from outre_async.aio._reorder import ReorderBuffer


def test_capacity_must_be_positive() -> None:
    for bad in (0, -1, 1.5):
        with pytest.raises(ConfigError, match="capacity"):
            Channel(bad)  # type: ignore[arg-type]


def test_full_channel_blocks_sender_until_received() -> None:
    async def body() -> None:
        ch: Channel[int] = Channel(2)
        await ch.send(1)
        await ch.send(2)
        blocked = asyncio.ensure_future(ch.send(3))
        await asyncio.sleep(0.01)
        assert not blocked.done() and ch.statistics().waiting_senders == 1
        assert await ch.receive() == 1
        await asyncio.wait_for(blocked, 1)
        assert [await ch.receive(), await ch.receive()] == [2, 3]
        assert ch.statistics().max_queued == 2

    run(body())


def test_close_drains_then_ends_and_rejects_senders() -> None:
    async def body() -> None:
        ch: Channel[int] = Channel(4)
        await ch.send(1)
        await ch.send(2)
        ch.close()
        assert [x async for x in ch] == [1, 2]
        with pytest.raises(EndOfChannel):
            await ch.receive()
        with pytest.raises(PipelineClosed):
            await ch.send(3)

    run(body())


def test_close_wakes_blocked_receivers_and_senders() -> None:
    async def body() -> None:
        empty: Channel[int] = Channel(1)
        receiver = asyncio.ensure_future(empty.receive())
        full: Channel[int] = Channel(1)
        await full.send(0)
        sender = asyncio.ensure_future(full.send(1))
        await asyncio.sleep(0.01)
        empty.close()
        full.close()
        with pytest.raises(EndOfChannel):
            await receiver
        with pytest.raises(PipelineClosed):
            await sender

    run(body())


def test_cancelled_send_queues_nothing_and_passes_the_turn() -> None:
    async def body() -> None:
        ch: Channel[int] = Channel(1)
        await ch.send(0)
        first = asyncio.ensure_future(ch.send(1))
        second = asyncio.ensure_future(ch.send(2))
        await asyncio.sleep(0.01)
        assert await ch.receive() == 0  # wakes `first` ...
        first.cancel()  # ... which is cancelled before it runs: `second` must get the slot
        await asyncio.wait_for(second, 1)
        assert await ch.receive() == 2 and len(ch) == 0

    run(body())


def test_many_producers_and_consumers_deliver_everything_once() -> None:
    async def body() -> None:
        ch: Channel[int] = Channel(3)
        rng = random.Random(0)
        got: list[int] = []

        async def produce(base: int) -> None:
            for i in range(50):
                await asyncio.sleep(rng.random() * 1e-3)
                await ch.send(base + i)

        async def consume() -> None:
            async for item in ch:
                await asyncio.sleep(rng.random() * 1e-3)
                got.append(item)

        async with asyncio.TaskGroup() as tg:
            consumers = [tg.create_task(consume()) for _ in range(3)]
            async with asyncio.TaskGroup() as producers:
                for p in range(4):
                    producers.create_task(produce(1000 * p))
            ch.close()
        assert all(c.done() for c in consumers)
        assert sorted(got) == sorted(1000 * p + i for p in range(4) for i in range(50))
        assert ch.statistics().max_queued <= 3

    run(body())


@given(st.permutations(list(range(30))))
def test_reorder_buffer_restores_order(perm: list[int]) -> None:
    buf: ReorderBuffer[int] = ReorderBuffer()
    out: list[int] = []
    for seq in perm:
        released = buf.push(seq, seq * 10)
        out += released
        assert len(buf) == seq_held(perm, seq, out)
    assert out == [s * 10 for s in range(30)]
    assert len(buf) == 0 and buf.next_seq == 30


def seq_held(perm: list[int], upto: int, out: list[int]) -> int:
    pushed = perm[: perm.index(upto) + 1]
    return len(pushed) - len(out)


def test_reorder_buffer_rejects_repeats() -> None:
    buf: ReorderBuffer[str] = ReorderBuffer()
    assert buf.push(1, "b") == []
    with pytest.raises(ConfigError):
        buf.push(1, "again")
    assert buf.push(0, "a") == ["a", "b"]
    with pytest.raises(ConfigError):
        buf.push(0, "old")
    buf.push(5, "f")
    assert buf.clear() == ["f"]
