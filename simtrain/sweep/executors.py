"""Executors: where a sweep's configurations run (local processes by default, or Ray).

An executor maps a picklable task over ``(key, payload)`` items and yields ``(key, result)``
pairs as they finish, in any order, keeping only a small window of items in flight so that
enumeration stays lazy. The driver (:mod:`simtrain.sweep.run`) stores each result as it
arrives; executors hold no results.

The local executor uses a ``spawn`` multiprocessing *context* created here, never a global
start method. Workers ignore SIGINT from their first instruction (they are started while the
driver ignores it, and an ignored signal stays ignored across ``exec``), so a Ctrl-C at the
terminal, which signals the whole process group, reaches only the driver, which stops them;
they exit by themselves if the driver is killed. The pool starts on the first task and lives
until :meth:`LocalExecutor.close`, so one pool serves several maps (a planner's stages);
:meth:`LocalExecutor.start` starts it early, its workers importing the ``preload`` modules
in the background while the driver works, and ``with_caller`` has the driver run tasks
too while every worker has one (a small plan estimates in the driver while a worker warms
up, then both simulate its picks). A worker that dies (killed, out of host memory) breaks
the pool: it is rebuilt and the configurations that were in flight rerun one at a time; one
whose worker dies twice while it runs alone is recorded as an error.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from simtrain.errors import SpecError

Task = Callable[[Any], dict[str, Any]]
Item = tuple[str, Any]

_WORKER_DIED = "worker process died twice while running this configuration"


class Executor(Protocol):
    """Runs a task over items and yields results as they finish."""

    num_workers: int

    def start(self) -> None:
        """Start the workers now rather than on the first task (no-op where there are none)."""
        ...

    def map_unordered(self, task: Task, items: Iterable[Item]) -> Iterator[tuple[str, Any]]:
        """Yield ``(key, task(payload))`` for every item, in completion order."""
        ...

    def close(self) -> None:
        """Release workers and connections."""
        ...


def _init_worker(driver_pid: int, preload: tuple[str, ...] = ()) -> None:
    """Ignore Ctrl-C (the driver handles it), exit when the driver dies (SIGKILL), import.

    A killed driver cannot stop its pool, and a pool worker never sees its task queue close,
    so each worker polls its parent id: once the driver is gone it is re-parented. The
    ``preload`` modules are imported before the worker takes its first task.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == driver_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="simtrain-driver-watch", daemon=True).start()
    for name in preload:
        importlib.import_module(name)


def _started() -> None:
    """A no-op task whose submission starts a worker."""


def died_row(message: str = _WORKER_DIED) -> dict[str, Any]:
    """The row recorded for a configuration whose worker died."""
    return {"status": "error", "error": message}


class InlineExecutor:
    """Runs every task in the calling process, one after another (no workers to start).

    For a handful of tasks in a process that has simtrain imported and warm already: a
    pool's workers would each import it and fill their own caches first.
    """

    num_workers = 1

    def start(self) -> None:
        """Nothing to start."""

    def map_unordered(self, task: Task, items: Iterable[Item]) -> Iterator[tuple[str, Any]]:
        """Yield ``(key, task(payload))`` for every item, in order."""
        for key, payload in items:
            yield key, task(payload)

    def close(self) -> None:
        """Nothing to release."""


class LocalExecutor:
    """A pool of local worker processes (all cores by default).

    Args:
        num_workers: worker processes (default: one per core).
        preload: modules each worker imports when it starts (those of the tasks it will
            run), so that a pool started early (:meth:`start`) is warm when they come.
        with_caller: the calling process runs tasks too, whenever every worker has one
            (a caller that is warm already and would only wait: a small plan's driver).
    """

    def __init__(
        self,
        num_workers: int | None = None,
        preload: tuple[str, ...] = (),
        with_caller: bool = False,
    ) -> None:
        self.num_workers = num_workers or os.cpu_count() or 1
        self.preload = preload
        self.with_caller = with_caller
        self._pool: ProcessPoolExecutor | None = None

    def start(self) -> None:
        """Start the workers now; they import the preload modules in the background."""
        if self._pool is None:
            self._pool = self._new_pool()

    def _new_pool(self) -> ProcessPoolExecutor:
        """A pool whose workers are all started now, with SIGINT ignored while they start."""
        pool = ProcessPoolExecutor(
            max_workers=self.num_workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(os.getpid(), self.preload),
        )
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            # Each submit starts a worker while none is idle: start them all here, inside
            # the window where they inherit the ignored SIGINT.
            for _ in range(self.num_workers):
                pool.submit(_started)
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
        return pool

    def map_unordered(self, task: Task, items: Iterable[Item]) -> Iterator[tuple[str, Any]]:
        """Run ``task`` over ``items`` in worker processes, yielding results as they finish.

        A dying worker breaks the whole pool, failing every configuration in flight, and
        which of them killed it is unknown. Those configurations are then rerun one at a
        time: an innocent one finishes, and one whose worker dies twice on its own is
        recorded as an error while the rest of the sweep goes on.

        ``with_caller``: each worker holds one task at a time, and the calling process runs
        the next one itself meanwhile (not while failed configurations are rerun alone).
        """
        source = iter(items)
        isolated: deque[Item] = deque()
        attempts: Counter[str] = Counter()
        pending: dict[Future[Any], tuple[Item, bool]] = {}  # future -> (item, ran alone)
        if self._pool is None:
            self._pool = self._new_pool()
        try:
            while True:
                if isolated:
                    if not pending:
                        item = isolated.popleft()
                        pending[self._pool.submit(task, item[1])] = (item, True)
                else:
                    in_flight = self.num_workers if self.with_caller else 2 * self.num_workers
                    while len(pending) < in_flight:
                        item = next(source, None)
                        if item is None:
                            break
                        pending[self._pool.submit(task, item[1])] = (item, False)
                mine = next(source, None) if self.with_caller and not isolated else None
                if mine is not None:  # the caller's share, while the workers run theirs
                    yield mine[0], task(mine[1])
                    done = {future for future in pending if future.done()}
                elif not pending:
                    return
                else:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                broken = False
                for future in done:
                    (key, payload), alone = pending.pop(future)
                    try:
                        result = future.result()
                    except BrokenProcessPool:
                        broken = True
                        if alone:
                            attempts[key] += 1
                        if attempts[key] < 2:
                            isolated.append((key, payload))
                            continue
                        result = died_row()
                    yield key, result
                if broken:
                    self._pool.shutdown(wait=False, cancel_futures=True)
                    isolated.extend(item for item, _ in pending.values())  # failed with it
                    pending.clear()
                    self._pool = self._new_pool()
        except BaseException:  # a Ctrl-C or an error: stop the workers at once
            self.close()
            raise

    def close(self) -> None:
        """Stop the workers at once (a Ctrl-C must not wait for running simulations)."""
        if self._pool is None:
            return
        # ProcessPoolExecutor has no public terminate before Python 3.14; its process table is
        # the only handle on the workers. Terminate them first, then wait for the pool's
        # manager thread, which sees them gone and exits: shutting down without waiting leaves
        # that thread to a closed wake-up pipe at interpreter exit (a traceback after Ctrl-C).
        for process in list(getattr(self._pool, "_processes", {}).values()):
            process.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None


def check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail fast, in one line, when a ``[ray://]HOST:PORT`` Ray address does not answer.

    Raises:
        SpecError: the address is malformed or nothing listens there.
    """
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise SpecError(f"'--address' must be auto, HOST:PORT or ray://HOST:PORT (got {address!r})")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SpecError(
            f"'--address' must reach a running Ray cluster (got {address!r}: {reason})"
        ) from None


class RayExecutor:
    """Ray tasks on a local Ray instance (address None) or an existing cluster.

    Workers on a remote cluster must have simtrain installed (``pip install simtrain[ray]``).
    """

    def __init__(self, num_workers: int | None = None, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise SpecError(
                "'--executor ray' needs Ray, the optional extra: pip install 'simtrain[ray]'"
            ) from None
        if address not in (None, "auto"):
            check_reachable(address)
        try:
            ray.init(
                address=address,
                num_cpus=num_workers if address is None else None,
                include_dashboard=False,
                log_to_driver=False,
                ignore_reinit_error=True,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            message = " ".join(str(exc).split())
            raise SpecError(f"'--address' must reach a running Ray cluster ({message})") from None
        self._ray = ray
        self.num_workers = int(ray.available_resources().get("CPU", 1)) or 1

    def start(self) -> None:
        """Nothing to start: Ray starts its workers itself."""

    def map_unordered(self, task: Task, items: Iterable[Item]) -> Iterator[tuple[str, Any]]:
        """Run ``task`` over ``items`` as Ray tasks, yielding results as they finish."""
        ray = self._ray
        remote = ray.remote(num_cpus=1, max_retries=1)(task)
        source = iter(items)
        pending: dict[Any, str] = {}
        try:
            while True:
                while len(pending) < 2 * self.num_workers:
                    item = next(source, None)
                    if item is None:
                        break
                    pending[remote.remote(item[1])] = item[0]
                if not pending:
                    return
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    key = pending.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        result = died_row(" ".join(f"{type(exc).__name__}: {exc}".split()))
                    yield key, result
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        """Disconnect from (and stop, if it was started here) the Ray instance."""
        self._ray.shutdown()


EXECUTORS: dict[str, Callable[..., Executor]] = {"local": LocalExecutor, "ray": RayExecutor}
"""Executor name -> factory ``(num_workers, address)``."""


def check_executor(name: str, address: str | None) -> None:
    """Raise a SpecError for an unknown executor or an address without Ray (no side effects)."""
    if name not in EXECUTORS:
        raise SpecError(f"'--executor' must be one of {', '.join(EXECUTORS)} (got {name!r})")
    if name == "local" and address is not None:
        raise SpecError(f"'--address' needs --executor ray (got {address!r} with local)")


def get_executor(name: str, num_workers: int | None = None, address: str | None = None) -> Executor:
    """Build the executor ``name``; an unknown name lists the known ones.

    Raises:
        SpecError: unknown executor, an address given to the local executor, or Ray errors.
    """
    check_executor(name, address)
    if name == "local":
        return LocalExecutor(num_workers)
    return RayExecutor(num_workers, address)
