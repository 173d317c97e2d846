"""Scenario sweeps (``gato eval``) and weight tuning (``gato tune``) over the one closed-loop
driver, gato.simloop.run_closed_loop: locally in a process pool or on a Ray cluster.

    spec = gato.eval.load_spec("sweep.yaml")
    res = gato.eval.run_eval(spec, "eval_out/sweep")                  # local pool
    res = gato.eval.run_eval(spec, "eval_out/sweep", ray="auto")      # a running Ray cluster
    res = gato.eval.run_eval_strict(spec, "eval_out/sweep")           # raises unless all ran ok

Modules: spec (the YAML format, validation, episode keys), episode (one episode -> one row),
studies (task kinds that bring their own closed loop and metrics: the joint-limit benches),
runner (executors, the resumable episode store, progress), results (tables, summary with
confidence intervals, plots, HTML report), tune (Ray Tune + ASHA, parameter YAML). Ray is
imported only by the Ray executor and by tune. docs/eval.md.
"""
from __future__ import annotations

from pathlib import Path

from .spec import DEFAULT_METRICS, METRICS, Spec, episode_key, load_spec, parse_spec

__all__ = ["Spec", "METRICS", "DEFAULT_METRICS", "load_spec", "parse_spec", "episode_key", "run_eval",
           "run_eval_strict", "EpisodesFailed"]


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


class EpisodesFailed(RuntimeError):
    """Raised by :func:`run_eval_strict`: some episodes of the run came back with
    ``status="error"``. ``failed``: their rows (by episode index); ``report``: the run's HTML
    report (every traceback). The message names each failed episode (label, scenario,
    index) and gives the first traceback."""

    # Name this many episodes in the message: a sweep where everything fails stays readable.
    SHOWN = 10

    def __init__(self, failed: list, report):
        self.failed, self.report = failed, report
        names = [f"{x['label']} on {x['scenario_id']} (episode {x['index']})" for x in failed[:self.SHOWN]]
        more = f", ... ({len(failed) - self.SHOWN} more)" if len(failed) > self.SHOWN else ""
        super().__init__(f"{len(failed)} episodes failed (report: {report}): {', '.join(names)}{more}\n"
                         f"first error ({failed[0]['label']} on {failed[0]['scenario_id']}):\n{failed[0]['error']}")


def run_eval_strict(spec: Spec, out, **kwargs) -> dict:
    """:func:`run_eval` for callers that need every episode: benchmarks whose tables are
    only meaningful complete. Same arguments (``kwargs`` go to run_eval) and result; the
    outputs under ``out`` are written first either way, so a failed or interrupted run can be
    inspected and resumed.

    Raises:
        KeyboardInterrupt: the run was interrupted (run_eval reports Ctrl-C in its result
            instead; here it propagates, so a script stops as if it had not been caught).
        EpisodesFailed: one or more episodes have ``status="error"``; names them.
    """
    r = run_eval(spec, out, **kwargs)
    if r["interrupted"]:
        raise KeyboardInterrupt
    failed = [x for x in r["rows"] if x["status"] != "ok"]
    if failed:
        raise EpisodesFailed(failed, r["report"])
    return r
