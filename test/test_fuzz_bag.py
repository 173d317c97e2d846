"""Malformed messages in a bag (issue 38): a bag records what was on the wire, including what
the controller rightly refused. A lockstep run of the controller, world and reference logic
(test/replay_fixtures.py, real CDR, MCAP as the recorder writes it) with seeded malformed
JointState and EEReference messages (test/fuzz_messages.py) on /joint_states and
/ee_reference between the good ones: the bringup summary (gato_ros.analysis), `gato replay`
(text and HTML reports, the worst-tick cases npz) complete and name what they skipped.
"""
import json

import numpy as np
import pytest

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
import_or_skip("gato_msgs.msg", _HINT)
an = import_or_skip("gato_ros.analysis", _HINT)
from fuzz_messages import Context, malformed  # noqa: E402

ROBOT = "iiwa14"
PERIOD_NS = 10_000_000


@pytest.fixture(scope="module")
def fuzzed_bag(tmp_path_factory):
    """(bag, {topic: malformed messages written}) of 0.6 s with 3 malformed messages per tick
    from tick 10 on, including an empty EEReference (n_knots 0: the report of the issue)."""
    from gato_msgs.msg import EEReference
    from replay_fixtures import record_lockstep_run

    rng = np.random.default_rng(3800)
    sent = {"/joint_states": 0, "/ee_reference": 0}

    def bad_messages(k, t, js, win):
        if k < 10:
            return []
        if k == 10:
            m = EEReference()               # the message that made bringup_sim exit 1
            m.header.stamp.sec, m.header.stamp.nanosec = divmod(t, 10**9)
            sent["/ee_reference"] += 1
            return [("/ee_reference", m)]
        out = []
        ctx = Context(stamp_ns=t - PERIOD_NS, names=list(js.names), q=js.position, qd=js.velocity,
                      ref=win.positions, knot_dt=win.knot_dt)
        for _ in range(3):
            kind = "JointState" if rng.random() < 0.5 else "EEReference"
            m, bad, muts = malformed(kind, ctx, rng, only_bad=True)
            assert bad, muts
            topic = "/joint_states" if kind == "JointState" else "/ee_reference"
            sent[topic] += 1
            out.append((topic, m))
        return out

    bag = record_lockstep_run(tmp_path_factory.mktemp("fuzzbag") / "bag", seconds=0.6, malformed=bad_messages,
                              controller={"N": 16})
    return bag, sent


def test_the_bringup_summary_completes_and_names_every_skipped_message(fuzzed_bag, tmp_path):
    bag, sent = fuzzed_bag
    s = an.summarize_bag(bag, ROBOT)
    sk = s["skipped"]
    assert sk["/ee_reference"]["count"] == sent["/ee_reference"] and sk["/joint_states"]["count"] == \
        sent["/joint_states"], (sk, sent)
    assert s["n_ticks"] == 60 and s["tracking_error_m"]["mean"] < 0.05, s["tracking_error_m"]
    assert "EEReference: positions holds 0 values" in sk["/ee_reference"]["first_reason"], sk
    text = an.format_summary(s)
    assert f"/ee_reference: {sent['/ee_reference']} message(s) skipped" in text, text
    assert f"/joint_states: {sent['/joint_states']} message(s) skipped" in text, text
    json.loads(an.summary_json(s))                                    # what bringup_sim writes
    assert an.plot_tracking(s, tmp_path / "tracking.png").read_bytes()[:4] == b"\x89PNG"


def test_gato_replay_completes_and_reports_the_skips_in_text_html_and_cases(fuzzed_bag, tmp_path):
    from gato.replay import replay_bag

    bag, sent = fuzzed_bag
    for html in (False, True):
        out = tmp_path / ("html" if html else "text")
        s = replay_bag(bag, out, html=html, log=None)
        assert s["ticks"] >= 50 and s["over_tolerance"] == 0, {k: s.get(k) for k in ("ticks", "over_tolerance")}
        sk = s["skipped"]
        assert sk["/joint_states"]["count"] == sent["/joint_states"], (sk, sent)
        assert sk["/ee_reference"]["count"] == sent["/ee_reference"], (sk, sent)
        report = (out / ("report.html" if html else "report.md")).read_text()
        assert f"/ee_reference: {sent['/ee_reference']} message(s) skipped" in report
        assert f"/joint_states: {sent['/joint_states']} message(s) skipped" in report
        with np.load(out / "worst_ticks.npz") as z:
            assert len(z.files) > 0
