"""The iteration rule (issue 40.1, issue 34 "two threads"): a loader runs one epoch at a time; an epoch
started while another is still being iterated is refused with a ConcurrentEpochError and the first
goes on; a loader used in a child forked after it started raises LoaderForkedError (issue 34 "fork").
Each sync case runs in a thread joined with a timeout, the fork in a child joined with one: a
regression fails here instead of hanging the suite."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from collections.abc import Callable
from typing import Any

import pytest
from conftest import labelled_store, run

import outre_async as oa

TIMEOUT = 120  # a cold numba cache compiles the kernels inside the first test


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> oa.Dataset:
    return labelled_store(tmp_path_factory.mktemp("rule") / "ds")


def _loader(ds: oa.Dataset, backend: str = "memory") -> oa.OutreLoader:
    return oa.OutreLoader(ds, fanouts=[3, 2], batch_size=32, io=oa.IOOptions(backend=backend))


def in_thread(fn: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    """``fn()`` in a daemon thread joined with ``timeout``: a hang is a failure, not a stuck suite."""
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed to the test's thread
            out["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"hung for {timeout} s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


@pytest.mark.parametrize("backend", ["memory", "io_uring"])
def test_a_kept_iterator_makes_the_next_for_refused_not_hung(dataset: oa.Dataset, backend: str) -> None:
    def notebook() -> None:
        with _loader(dataset, backend) as loader:
            it = iter(loader)
            first = next(it)
            with pytest.raises(oa.errors.ConcurrentEpochError, match="epoch 1 of this loader was started while epoch 0") as err:
                for _ in loader:
                    pass
            assert "\n" not in str(err.value) and "close the first iterator" in str(err.value)
            assert first.batch_size + sum(b.batch_size for b in it) == 500  # the first epoch went on, whole
            assert sum(b.batch_size for b in loader) == 500  # and once it ended, the next one runs
            it = iter(loader)
            next(it)
            del it  # dropped: its epoch closes at once, no refusal
            assert sum(b.batch_size for b in loader) == 500
            assert loader.epoch == 4

    in_thread(notebook)


def test_a_second_thread_is_refused_by_name_and_the_first_finishes(dataset: oa.Dataset) -> None:
    loader = _loader(dataset)
    started, second_done = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def first() -> int:
        n = 0
        for batch in loader:
            n += batch.batch_size
            started.set()
            second_done.wait(TIMEOUT)
        return n

    def second() -> None:
        started.wait(TIMEOUT)
        try:
            for _ in loader:
                pass
        except oa.errors.ConcurrentEpochError as exc:
            seen["error"] = exc
        finally:
            second_done.set()

    helper = threading.Thread(target=second, daemon=True)
    helper.start()
    try:
        assert in_thread(first) == 500
    finally:
        second_done.set()
        helper.join(TIMEOUT)
        loader.close()
    assert not helper.is_alive()
    assert isinstance(seen.get("error"), oa.errors.ConcurrentEpochError) and not isinstance(seen["error"], oa.errors.PipelineClosed)


def test_two_concurrent_async_for_one_refused_the_other_whole(dataset: oa.Dataset) -> None:
    async def body() -> list[Any]:
        async with _loader(dataset) as loader:
            async def consume() -> int:
                n = 0
                async for batch in loader:
                    n += batch.batch_size
                    await asyncio.sleep(0.1)  # longer than the grace (EPOCH_GRACE_S): the other start is refused
                return n

            results = await asyncio.gather(consume(), consume(), return_exceptions=True)
            async for _ in loader:  # one at a time works afterwards, and after a break too
                break
            after = [b.batch_size async for b in loader]
            return [*results, sum(after)]

    results = run(body(), timeout=TIMEOUT)
    assert sorted(type(r).__name__ for r in results[:2]) == ["ConcurrentEpochError", "int"], results
    assert 500 in results[:2] and results[2] == 500


def _iterate_in_child(loader: oa.OutreLoader, queue: Any) -> None:
    try:
        next(iter(loader))
    except oa.OutreError as exc:
        queue.put((type(exc).__name__, str(exc)))
    else:
        queue.put(("no error", ""))
    loader.close()  # lets go without waiting for the parent's threads
    del loader


@pytest.mark.parametrize("backend", ["memory", "io_uring"])
def test_a_loader_iterated_in_a_forked_child_raises_by_name(dataset: oa.Dataset, backend: str) -> None:
    ctx = multiprocessing.get_context("fork")
    with _loader(dataset, backend) as loader:
        next(iter(loader))  # started: the loop thread, samplers and ring live in this process
        queue = ctx.Queue()
        child = _run_forked(ctx, _iterate_in_child, loader, queue)
        assert child.exitcode == 0
        name, message = queue.get(timeout=10)
        assert name == "LoaderForkedError", (name, message)
        assert "make the loader in the worker" in message and "\n" not in message
        assert sum(b.batch_size for b in loader) == 500  # the parent's loader is untouched


def _run_forked(ctx: Any, target: Any, *args: Any) -> Any:
    """Run ``target(*args)`` in a forked child, joined within the timeout (a hung child fails the test)."""
    child = ctx.Process(target=target, args=args)
    child.start()
    child.join(TIMEOUT)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked child hung")
    return child


def _count_in_child(loader: oa.OutreLoader, queue: Any) -> None:
    try:
        queue.put(sum(b.batch_size for b in loader))
    except oa.OutreError as exc:
        queue.put(f"{type(exc).__name__}: {exc}")
    loader.close()


def test_a_loader_closed_before_the_fork_opens_afresh_in_the_child(dataset: oa.Dataset) -> None:
    """Only what is open is the parent's: a loader closed before the fork holds nothing inherited."""
    ctx = multiprocessing.get_context("fork")
    loader = _loader(dataset)
    next(iter(loader))
    loader.close()
    queue = ctx.Queue()
    child = _run_forked(ctx, _count_in_child, loader, queue)
    assert queue.get(timeout=10) == 500 and child.exitcode == 0
