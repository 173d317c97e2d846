"""gato.linsys_autotune: fit / decide / persist / resolve, the controller's use of a
tuned entry, and the autotune command-line tool."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gato
from gato import linsys_autotune as lt

N = 16
DT = 0.03125


@pytest.fixture
def tuning_file(tmp_path, monkeypatch):
    path = tmp_path / "linsys_tuning.json"
    monkeypatch.setenv("GATO_LINSYS_TUNING", str(path))
    return path


# ----------------------------------------------------------------------------- fit_tau
def test_fit_tau_linear_cost_crosses_at_known_point():
    rng = np.random.default_rng(0)
    pe = rng.uniform(0.0, 1.0, 1200)
    ms = 1.0 + 4.0 * pe                  # crosses bdsv_ms = 3 at pred_err 0.5 exactly
    tau, diag = lt.fit_tau(pe, ms, 3.0)
    assert tau == pytest.approx(0.5, abs=1e-9)   # exact on linear data: medians commute with the map
    assert diag["bin_center"].shape == (12,) and diag["n"].sum() == 1200
    assert np.all(np.diff(diag["bin_cost"]) >= 0)


def test_fit_tau_noisy_cost_and_step_cost():
    rng = np.random.default_rng(1)
    pe = rng.uniform(0.0, 1.0, 2000)
    ms = 1.0 + 4.0 * pe + rng.normal(0.0, 0.1, pe.size)
    tau, _ = lt.fit_tau(pe, ms, 3.0)
    assert abs(tau - 0.5) < 0.03
    step = np.where(pe < 0.3, 1.0, 5.0)  # a cost jump at 0.3: the crossing lies in the bracketing bins
    tau, diag = lt.fit_tau(pe, step, 3.0, n_bins=20)
    assert 0.25 < tau < 0.35


def test_fit_tau_no_crossing_and_crossing_everywhere():
    pe = np.linspace(0.0, 1.0, 100)
    ms = 1.0 + pe
    tau, _ = lt.fit_tau(pe, ms, 10.0)     # pcg below bdsv everywhere
    assert tau is None
    tau, _ = lt.fit_tau(pe, ms, 0.5)      # pcg above bdsv already in the first bin
    assert tau == 0.0


def test_fit_tau_running_max_removes_inversions():
    pe = np.linspace(0.0, 1.0, 120)
    ms = np.where((pe > 0.4) & (pe < 0.6), 0.5, 1.0 + pe)  # a dip in the middle bins
    tau, diag = lt.fit_tau(pe, ms, 1.55)
    assert np.all(np.diff(diag["bin_cost"]) >= 0)
    assert np.all(diag["bin_cost"] >= diag["bin_cost_raw"])
    assert 0.5 < tau < 0.65  # raw 1 + pe reaches 1.55 at 0.55; the dip must not move it below 0.4


def test_fit_tau_bad_input():
    with pytest.raises(ValueError, match="solve_ms"):
        lt.fit_tau([0.1, 0.2], [1.0], 1.0)
    with pytest.raises(ValueError, match="bdsv_ms"):
        lt.fit_tau([0.1, 0.2], [1.0, 2.0], 0.0)
    with pytest.raises(ValueError, match="pred_err"):
        lt.fit_tau([np.nan, 0.2], [1.0, 2.0], 1.0)


# ----------------------------------------------------------------------------- decide_policy
def test_decide_policy_thresholds():
    pe = np.arange(100) / 100.0                       # 0.00 .. 0.99
    d = lt.decide_policy(pe, 0.495)
    assert d == {"policy": "auto", "tau": 0.495, "cold_frac": 0.5}
    d = lt.decide_policy(pe, 0.985)                   # 1 % cold <= lo = 2 %
    assert d["policy"] == "pcg" and d["cold_frac"] == pytest.approx(0.01)
    d = lt.decide_policy(pe, 0.005)                   # 99 % cold >= hi = 98 %
    assert d["policy"] == "bdsv" and d["cold_frac"] == pytest.approx(0.99)
    assert lt.decide_policy(pe, None) == {"policy": "pcg", "tau": None, "cold_frac": 0.0}
    assert lt.decide_policy(pe, 0.0)["policy"] == "bdsv"
    assert lt.decide_policy(pe, 0.5, lo=0.6, hi=0.9)["policy"] == "pcg"   # 49 % cold <= lo


def test_fit_then_decide_on_bimodal_trace():
    rng = np.random.default_rng(2)
    warm = rng.uniform(0.0, 0.05, 900)                # warm solves: cheap PCG
    cold = rng.uniform(0.3, 0.6, 100)                 # cold solves: expensive PCG
    pe = np.concatenate([warm, cold])
    ms = np.where(pe < 0.1, 1.0, 6.0)
    tau, _ = lt.fit_tau(pe, ms, 3.0)
    assert 0.04 < tau < 0.35
    d = lt.decide_policy(pe, tau)
    assert d["policy"] == "auto" and d["cold_frac"] == pytest.approx(0.1)


# ----------------------------------------------------------------------------- persistence
def test_save_load_lookup_roundtrip(tuning_file):
    assert lt.load_tuning() == {}
    assert lt.lookup("iiwa14", 32, "fig8") is None
    p = lt.save_tuning("iiwa14", 32, "fig8", {"policy": "auto", "tau": np.float64(0.12), "cold_frac": 0.3,
                                               "bins": np.array([1.0, 2.0])})
    assert p == tuning_file and tuning_file.is_file()
    lt.save_tuning("iiwa14", 16, "fig8", {"policy": "pcg", "tau": None})
    table = json.loads(tuning_file.read_text())
    assert set(table) == {"iiwa14|32|fig8", "iiwa14|16|fig8"}
    e = lt.lookup("iiwa14", 32, "fig8")
    assert e["policy"] == "auto" and e["tau"] == 0.12 and e["bins"] == [1.0, 2.0]
    lt.save_tuning("iiwa14", 32, "fig8", {"policy": "bdsv", "tau": 0.0})  # replace
    assert lt.lookup("iiwa14", 32, "fig8")["policy"] == "bdsv"
    assert lt.load_tuning(tuning_file) == lt.load_tuning()


def test_explicit_path_beats_env(tuning_file, tmp_path):
    other = tmp_path / "other.json"
    lt.save_tuning("iiwa14", 32, "x", {"policy": "pcg", "tau": None}, path=other)
    assert lt.lookup("iiwa14", 32, "x", path=other)["policy"] == "pcg"
    assert lt.lookup("iiwa14", 32, "x") is None and not tuning_file.exists()


def test_persistence_bad_input(tuning_file):
    with pytest.raises(ValueError, match="policy"):
        lt.save_tuning("iiwa14", 32, "t", {"policy": "fast", "tau": 0.1})
    with pytest.raises(ValueError, match="tau"):
        lt.save_tuning("iiwa14", 32, "t", {"policy": "auto", "tau": None})
    with pytest.raises(ValueError, match="task_tag"):
        lt.save_tuning("iiwa14", 32, "", {"policy": "pcg", "tau": None})
    tuning_file.write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        lt.load_tuning()


# ----------------------------------------------------------------------------- resolution
def test_resolve_linsys_precedence(tuning_file):
    assert lt.resolve_linsys(False) == ("auto", 0.1)
    assert lt.resolve_linsys(True) == ("bdsv", None)
    assert lt.resolve_linsys(False, "pcg", 0.3) == ("pcg", None)
    assert lt.resolve_linsys(False, "auto", 0.3) == ("auto", 0.3)
    assert lt.resolve_linsys(False, bdsv_threshold=0.2) == ("auto", 0.2)
    lt.save_tuning("iiwa14", 32, "a", {"policy": "auto", "tau": 0.25})
    lt.save_tuning("iiwa14", 32, "p", {"policy": "pcg", "tau": 0.4})
    kw = dict(plant="iiwa14", N=32)
    assert lt.resolve_linsys(False, task_tag="a", **kw) == ("auto", 0.25)
    assert lt.resolve_linsys(False, task_tag="p", **kw) == ("pcg", None)
    assert lt.resolve_linsys(False, "bdsv", task_tag="a", **kw) == ("bdsv", None)   # explicit wins
    assert lt.resolve_linsys(False, "auto", task_tag="p", **kw) == ("auto", 0.4)    # fitted tau reused
    assert lt.resolve_linsys(False, None, 0.05, task_tag="a", **kw) == ("auto", 0.05)
    assert lt.resolve_linsys(False, task_tag="missing", **kw) == ("auto", 0.1)
    with pytest.raises(ValueError, match="linsys"):
        lt.resolve_linsys(False, "cholesky")
    with pytest.raises(ValueError, match="bdsv_threshold"):
        lt.resolve_linsys(False, "auto", -1.0)


def test_resolve_admm_linsys_precedence(tuning_file):
    assert lt.ADMM_FACTOR_MIN_N == 48
    assert lt.resolve_admm_linsys(N=47) == ("pcg", None)
    assert lt.resolve_admm_linsys(N=48) == ("bdsv_factor", None)
    assert lt.resolve_admm_linsys() == ("pcg", None)
    assert lt.resolve_admm_linsys(N=16, backend="cpu") == ("bdsv_factor", None)
    assert lt.resolve_admm_linsys("auto") == ("auto", 0.1)
    assert lt.resolve_admm_linsys("auto", fallback_tau=0.2) == ("auto", 0.2)
    assert lt.resolve_admm_linsys("auto", 0.03, fallback_tau=0.2) == ("auto", 0.03)
    lt.save_tuning("iiwa14", 64, "t", {"policy": "auto", "tau": 0.2, "admm_policy": "auto", "admm_tau": 0.07})
    assert lt.resolve_admm_linsys(plant="iiwa14", N=64, task_tag="t", fallback_tau=0.2) == ("auto", 0.07)
    assert lt.resolve_admm_linsys("pcg", plant="iiwa14", N=64, task_tag="t") == ("pcg", None)
    with pytest.raises(ValueError, match="admm_linsys"):
        lt.resolve_admm_linsys("bdsv")


def test_controller_reads_tuned_entry(tuning_file):
    urdf = gato.robot_urdf("iiwa14")
    lt.save_tuning("iiwa14", N, "tuned", {"policy": "pcg", "tau": 0.3})
    lt.save_tuning("iiwa14", N, "auto", {"policy": "auto", "tau": 0.3})
    s = gato.BSQP(urdf, 1, N, DT, linsys="bdsv")
    c = gato.MPCController(s, task_tag="tuned")
    assert (c.linsys, c.bdsv_threshold, s.linsys) == ("pcg", None, "pcg")
    c = gato.MPCController(s, task_tag="auto")
    assert (c.linsys, c.bdsv_threshold) == ("auto", 0.3)
    c = gato.MPCController(s, task_tag="auto", linsys="bdsv_first")   # explicit wins
    assert (c.linsys, s.linsys) == ("bdsv_first", "bdsv_first")
    c = gato.MPCController(s)                                          # no tag: wired CPU default
    assert (c.linsys, c.bdsv_threshold) == ("bdsv", None)
    assert (c.admm_linsys, c.admm_threshold) == ("bdsv_factor", None)  # CPU: bdsv_factor at every N


# ----------------------------------------------------------------------------- the CLI
def test_cli_in_process_writes_entry(tmp_path, capsys):
    from gato.tools import autotune_linsys as tool

    out = tmp_path / "t.json"
    rc = tool.main(["--N", str(N), "--steps", "30", "--task-tag", "cli", "--out", str(out)])
    assert rc == 0
    err = capsys.readouterr().err
    assert "pcg leg: 30/30" in err and "bdsv leg: 30/30" in err and "decision: policy=" in err
    e = lt.lookup("iiwa14", N, "cli", path=out)
    assert e["policy"] in lt.POLICIES
    assert e["probe"]["steps"] == 30 and e["probe"]["bdsv_median_ms"] > 0
    assert e["probe"]["pcg_mean_ee_err_m"] < 0.05   # the probe loop actually tracks the figure-8
    assert set(e) >= {"policy", "tau", "cold_frac", "date", "git_sha", "probe"}


def test_cli_module_honours_env_and_rejects_admm(tmp_path):
    path = tmp_path / "env.json"
    env = dict(os.environ, GATO_LINSYS_TUNING=str(path))
    cmd = [sys.executable, "-m", "gato.tools.autotune_linsys", "--N", str(N), "--steps", "12",
           "--task-tag", "envtag", "--quiet"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "iiwa14|16|envtag" in json.loads(path.read_text())
    r = subprocess.run(cmd + ["--admm"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--admm" in r.stderr and "not implemented" in r.stderr
