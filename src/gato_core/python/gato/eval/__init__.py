"""Scenario sweeps (``gato eval``) and weight tuning (``gato tune``) over the one closed-loop
driver, gato.simloop.run_closed_loop: locally in a process pool or on a Ray cluster.

    spec = gato.eval.load_spec("sweep.yaml")
    res = gato.eval.run_eval(spec, "eval_out/sweep")                  # local pool
    res = gato.eval.run_eval(spec, "eval_out/sweep", ray="auto")      # a running Ray cluster

Modules: spec (the YAML format, validation, episode keys), episode (one episode -> one row),
studies (task kinds that bring their own closed loop and metrics: the joint-limit benches),
runner (executors, the resumable episode store, progress), results (tables, summary with
confidence intervals, plots, HTML report), tune (Ray Tune + ASHA, parameter YAML). Ray is
imported only by the Ray executor and by tune. docs/eval.md.
"""
from __future__ import annotations

from pathlib import Path

from .spec import DEFAULT_METRICS, METRICS, Spec, episode_key, load_spec, parse_spec

__all__ = ["Spec", "METRICS", "DEFAULT_METRICS", "load_spec", "parse_spec", "episode_key", "run_eval"]


def run_eval(spec: Spec, out, *, ray=None, workers=None, retries=2, progress=True, log=None, episodes=None,
             executor=None) -> dict:
    """Run (or resume) every episode of ``spec`` and write the outputs under ``out``.

    Args:
        spec: a validated :class:`Spec`; out: output folder (episodes/ keeps the state).
        ray: None (the local process pool), "auto" / an address (a Ray cluster), or "local"
            (a private local Ray instance; also used when Ray is already initialised).
        workers: local pool size (default: the CPU count); retries: re-runs of an episode
            whose worker died. progress: the stderr progress bar. log: callable(str) or None.
        episodes: run these episode dicts instead of ``spec.episodes()``. executor: an
            executor object instead of the one ``ray`` / ``workers`` select.

    Returns {"ran", "skipped", "interrupted", "rows" (this spec's rows, by index), and the
    paths of gato.eval.results.write_outputs}.
    """
    from .results import write_outputs
    from .runner import EpisodeStore, make_executor, run_episodes

    eps = spec.episodes() if episodes is None else episodes
    ex = executor if executor is not None else make_executor(ray, workers, retries)
    state = run_episodes(eps, out, ex, progress=progress, log=log)
    rows = EpisodeStore(out).rows({ep["key"] for ep in eps})
    state["executor"] = f"{ex.name} ({ex.workers} workers)"
    outs = write_outputs(Path(out), spec, rows, state)
    return dict(state, rows=rows, **outs)
