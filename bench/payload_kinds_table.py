"""The payload-kinds study's table (issue 32): successes per payload case (rows, the spec's order)
and planner entry (columns) from a gato eval run of bench/specs/payload_kinds_iiwa14.yaml (or its
ramp-mix twin), with the failed runs named (scenario, joint, peak |dq| / limit after any 1 ms step,
when the limits were first exceeded).

    gato eval bench/specs/payload_kinds_iiwa14.yaml --out OUT --workers 1
    python bench/payload_kinds_table.py OUT bench/specs/payload_kinds_iiwa14.yaml
"""
import argparse
import csv
from pathlib import Path


def table(rows, cases, labels) -> str:
    """Markdown: one row per case, one column per label, cells "successes / runs"."""
    out = ["| payload case | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for c in cases:
        cells = []
        for lab in labels:
            rs = [r for r in rows if r["disturbance_case"] == c and r["label"] == lab]
            cells.append(f"{sum(int(r['success'] == '1') for r in rs)} / {len(rs)}" if rs else "-")
        out.append(f"| {c} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def failures(rows) -> list:
    out = []
    for r in rows:
        if r["success"] != "1":
            t = r.get("step_first_violation_t") or ""
            j = r.get("step_qd_joint")
            out.append(f"{r['label']} {r['disturbance_case']} {r['scenario_id']}: {r['stop_reason']}, "
                       f"J{int(j) + 1 if j not in (None, '') else '?'} {float(r['step_qd_ratio'] or 'nan'):.2f}x"
                       + (f" from t = {float(t):.3f} s" if t else ""))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the gato eval output folder (results.csv)")
    ap.add_argument("spec", help="the spec it ran (for the case and planner order)")
    a = ap.parse_args(argv)
    from gato.eval.spec import load_spec

    spec = load_spec(a.spec)
    rows = list(csv.DictReader(open(Path(a.out) / "results.csv")))
    print(table(rows, list(spec.disturbances), [p["label"] for p in spec.planners]))
    print()
    for line in failures(rows):
        print("- " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
