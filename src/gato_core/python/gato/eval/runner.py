"""Run a sweep's episodes on an executor and keep what finished: the local process pool
(default, standard library only) or Ray (``ray`` imported only here, in :class:`RayExecutor`).

Store: ``<out>/episodes/<key>.json``, one file per finished episode, written by the driver
process only and atomically (temporary file + rename). That directory IS the run's state:
a rerun skips every key already there (resume), Ctrl-C or a dead driver leave only whole
files, and the tables (gato.eval.results) are rebuilt from it at the end of every run,
interrupted or not.

Faults: an episode that raises comes back as a row with ``status="error"`` (gato.eval.
episode.run_episode). A worker process that dies (killed, segfault, out of memory) is
retried: the pool is rebuilt and the episodes that were in flight are resubmitted, each at
most ``retries`` times (then recorded as an error naming the deaths); on Ray the task's
``max_retries`` does the same.

Determinism: episodes are fully resolved before they are submitted and run lockstep, so the
rows do not depend on the executor, the worker count or the order of completion (the
tables are sorted by episode index).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from .episode import identity, run_episode

__all__ = ["EpisodeStore", "Progress", "LocalExecutor", "RayExecutor", "make_executor", "run_episodes"]


class EpisodeStore:
    """Finished episode rows under ``<out>/episodes``: ``done()`` the keys present,
    ``put(row)`` atomically, ``rows()`` every row (sorted by index)."""

    def __init__(self, out):
        self.dir = Path(out) / "episodes"
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob(".*.tmp"):     # a row half-written by a killed run: not a result
            stale.unlink(missing_ok=True)

    def done(self) -> set:
        return {p.stem for p in self.dir.glob("*.json")}

    def put(self, row: dict) -> None:
        tmp = self.dir / f".{row['key']}.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps(row, allow_nan=True))
            os.replace(tmp, self.dir / f"{row['key']}.json")
        finally:   # Ctrl-C between the write and the rename: no half-written file left behind
            tmp.unlink(missing_ok=True)

    def rows(self, keys=None) -> list:
        """Rows of ``keys`` (all when None), sorted by episode index."""
        out = []
        for p in sorted(self.dir.glob("*.json")):
            if keys is None or p.stem in keys:
                out.append(json.loads(p.read_text()))
        return sorted(out, key=lambda r: r["index"])


class Progress:
    """A one-line progress bar with rate and ETA on ``stream`` (stderr), redrawn at most
    every ``min_interval`` s; silent when ``enabled`` is False."""

    def __init__(self, total: int, *, skipped=0, enabled=True, stream=None, min_interval=0.5):
        self.total, self.skipped, self.done, self.errors = total, skipped, 0, 0
        self.enabled, self.stream = enabled, stream or sys.stderr
        self.t0, self.last, self.min_interval = time.monotonic(), 0.0, min_interval

    def update(self, row: dict) -> None:
        self.done += 1
        self.errors += row.get("status") != "ok"
        self.draw()

    def draw(self, final=False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self.last < self.min_interval and self.done < self.total:
            return
        self.last = now
        el = now - self.t0
        rate = self.done / el if el > 0 else 0.0
        left = self.total - self.done
        eta = f"{left / rate:6.0f} s" if rate > 0 else "     ? s"
        w = 30
        fill = int(w * self.done / self.total) if self.total else w
        msg = (f"\r[{'#' * fill}{'.' * (w - fill)}] {self.done}/{self.total} episodes"
               f"{f' (+{self.skipped} done before)' if self.skipped else ''}, {self.errors} errors, "
               f"{rate * 60:5.1f}/min, ETA {eta}")
        self.stream.write(msg + ("\n" if final else ""))
        self.stream.flush()


def _worker_init():
    # Ctrl-C goes to the whole process group: the driver handles it, workers just stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: Thread pools of the numeric libraries in each worker: one episode is one CPU (as Ray's
#: workers, which get OMP_NUM_THREADS=1). Idle OpenBLAS / OpenMP threads spin, and two
#: workers with two threads each oversubscribe a 2-core machine. A value the user set wins.
WORKER_THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class _WorkerEnv:
    """Context: os.environ with :data:`WORKER_THREAD_ENV` (unset names only) while the pool
    spawns its workers (spawned children copy the environment at start)."""

    def __enter__(self):
        self.added = [k for k in WORKER_THREAD_ENV if k not in os.environ]
        os.environ.update({k: WORKER_THREAD_ENV[k] for k in self.added})

    def __exit__(self, *exc):
        for k in self.added:
            os.environ.pop(k, None)


class LocalExecutor:
    """A process pool of ``workers`` processes (default: the CPU count), spawn start method
    (no forked solver state), one numeric-library thread per worker (:data:`WORKER_THREAD_ENV`).
    ``retries``: how often an episode whose worker died is resubmitted."""

    name = "local"

    def __init__(self, workers=None, retries=2):
        self.workers = int(workers or os.cpu_count() or 1)
        if self.workers < 1:
            raise ValueError(f"workers: expected >= 1, got {workers!r}")
        self.retries = int(retries)

    def run(self, episodes, on_row):
        """Run ``episodes``; ``on_row(row)`` for each as it finishes (in the driver)."""
        import multiprocessing as mp
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool

        ctx = mp.get_context("spawn")
        pending = {ep["key"]: ep for ep in episodes}
        deaths = {k: 0 for k in pending}
        while pending:
            pool = ProcessPoolExecutor(max_workers=min(self.workers, len(pending)), mp_context=ctx,
                                       initializer=_worker_init)
            broken = False
            try:
                with _WorkerEnv():  # workers spawn on submit
                    futs = {pool.submit(run_episode, ep): k for k, ep in pending.items()}
                while futs:
                    finished, _ = wait(futs, return_when=FIRST_COMPLETED)
                    for f in finished:
                        k = futs.pop(f)
                        try:
                            row = f.result()
                        except BrokenProcessPool:
                            broken = True
                            continue
                        pending.pop(k)
                        on_row(row)
                    if broken:
                        # Keep what finished before the pool broke; the rest is resubmitted.
                        for f, k in futs.items():
                            if f.done() and not f.cancelled() and f.exception() is None:
                                pending.pop(k)
                                on_row(f.result())
                        break
            except BaseException:
                _kill_pool(pool)
                raise
            if broken:
                # Which episode killed its worker is unknown: every one in flight is charged.
                _kill_pool(pool)
                for k in list(pending):
                    deaths[k] += 1
                    if deaths[k] > self.retries:
                        ep = pending.pop(k)
                        on_row(_dead_row(ep, deaths[k]))
            else:
                pool.shutdown(wait=True)


def _kill_pool(pool) -> None:
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(timeout=5)


def _dead_row(ep: dict, deaths: int) -> dict:
    row = identity(ep, "error", f"worker died {deaths} times while running this episode (killed, crashed or "
                                "out of memory)")
    row["wall_s"] = float("nan")
    return row


class RayExecutor:
    """Ray tasks, one per episode (``num_cpus=1``, ``max_retries=retries``: a task whose
    worker dies is re-run). ``address``: "auto" (a running cluster: ``ray start``), a
    cluster address, or None (Ray already initialised in this process, else a local
    instance). Workers need the same gato installed (docs/eval.md); only the episode dicts
    and this module's function travel."""

    name = "ray"

    def __init__(self, address=None, retries=2):
        import ray  # the optional dependency: only here

        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.retries = int(retries)
        self.workers = int(ray.cluster_resources().get("CPU", 1))

    def run(self, episodes, on_row):
        ray = self.ray
        remote = ray.remote(num_cpus=1, max_retries=self.retries)(run_episode)
        refs = {remote.remote(ep): ep for ep in episodes}
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                for r in ready:
                    ep = refs.pop(r)
                    try:
                        row = ray.get(r)
                    except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                            ray.exceptions.OutOfMemoryError):
                        row = _dead_row(ep, self.retries + 1)
                    on_row(row)
        except BaseException:
            for r in refs:
                ray.cancel(r, force=True)
            raise


def make_executor(ray_address=None, workers=None, retries=2):
    """:class:`RayExecutor` when ``ray_address`` is given ("auto", an address, or "local" for
    a private local instance), else :class:`LocalExecutor`."""
    if ray_address is None:
        return LocalExecutor(workers, retries)
    return RayExecutor(None if ray_address == "local" else ray_address, retries)


def run_episodes(episodes, out, executor, *, progress=True, log=None) -> dict:
    """Run the episodes of ``episodes`` not yet in ``<out>/episodes`` on ``executor``.

    Returns {"ran": n run now, "skipped": n done before, "interrupted": bool}. Ctrl-C stops
    the run (workers terminated) with every finished episode stored; it is reported as
    ``interrupted`` rather than raised, so the caller can still write the tables."""
    store = EpisodeStore(out)
    done = store.done()
    todo = [ep for ep in episodes if ep["key"] not in done]
    skipped = len(episodes) - len(todo)
    if log:
        log(f"{len(episodes)} episodes: {skipped} already done, {len(todo)} to run on {executor.name} "
            f"({executor.workers} workers)")
    bar = Progress(len(todo), skipped=skipped, enabled=progress)
    ran = 0

    def on_row(row):
        nonlocal ran
        store.put(row)
        ran += 1
        bar.update(row)

    interrupted = False
    try:
        if todo:
            executor.run(todo, on_row)
    except KeyboardInterrupt:
        interrupted = True
    bar.draw(final=True)
    return dict(ran=ran, skipped=skipped, interrupted=interrupted)
