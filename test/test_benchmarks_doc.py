"""docs/benchmarks.md and its companions (docs/benchmarks_sampling.md, docs/benchmarks_ros.md,
docs/benchmarks_recording.md, docs/benchmarks_hypotheses.md, docs/benchmarks_install.md,
docs/benchmarks_solver.md, docs/benchmarks_arms.md) stay navigable: the index at the top
of docs/benchmarks.md lists every section of every file, a text of the repository that names a
section of one of them ("docs/benchmarks_sampling.md, section "Sampling planner"") names one that
exists in that file, and no page grows past what a reader scans (one job per page)."""
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import benchmarks_doc  # noqa: E402

DOCS = {"benchmarks.md": benchmarks_doc.MAIN, "benchmarks_ros.md": benchmarks_doc.ROS,
        "benchmarks_hypotheses.md": benchmarks_doc.HYP, "benchmarks_sampling.md": benchmarks_doc.SAMPLING,
        "benchmarks_recording.md": benchmarks_doc.REC, "benchmarks_install.md": benchmarks_doc.INSTALL,
        "benchmarks_solver.md": benchmarks_doc.SOLVER,
        "benchmarks_arms.md": benchmarks_doc.ARMS}
# The texts that cite benchmark sections: docs, READMEs, code comments, bench specs, tests.
CITING = [p for pattern in ("*.md", "docs/*.md", "src/**/*.md", "src/**/*.py", "bench/**/*.py",
                            "bench/**/*.yaml", "test/*.py", "src/**/*.yaml")
          for p in ROOT.glob(pattern) if "/build/" not in str(p) and "/install/" not in str(p)]


def test_the_index_lists_every_section_of_every_file():
    main_text = benchmarks_doc.MAIN.read_text()
    assert main_text == benchmarks_doc.with_index(main_text), \
        "the index of docs/benchmarks.md is stale: run python bench/benchmarks_doc.py --write"


def test_every_index_link_names_an_existing_heading():
    main_text = benchmarks_doc.MAIN.read_text()
    block = main_text.split(benchmarks_doc.INDEX_START, 1)[1].split(benchmarks_doc.INDEX_END, 1)[0]
    anchors = {name: {a for _, _, a in benchmarks_doc.headings(path.read_text())} for name, path in DOCS.items()}
    links = re.findall(r"\]\(((?:benchmarks_(?:ros|hypotheses|sampling|recording|install|solver|arms)\.md)?)#([^)]+)\)", block)
    assert len(links) == sum(len(a) for a in anchors.values())
    for file, anchor in links:
        assert anchor in anchors[file or "benchmarks.md"], (file, anchor)


def test_the_anchors_follow_githubs_rules():
    heads = benchmarks_doc.headings("## A: b (c; d) -> `e`, 1.5 µs\n```\n## not a heading\n```\n"
                                    "### A: b (c; d) -> `e`, 1.5 µs\n")
    assert heads == [(2, "A: b (c; d) -> `e`, 1.5 µs", "a-b-c-d---e-15-µs"),
                     (3, "A: b (c; d) -> `e`, 1.5 µs", "a-b-c-d---e-15-µs-1")]


def test_a_missing_index_block_is_named():
    with pytest.raises(ValueError, match="no index block"):
        benchmarks_doc.with_index("# Benchmarks\n", [])


def test_cited_sections_exist_in_the_file_cited():
    titles = {name: [" ".join(t.split()) for _, t, _ in benchmarks_doc.headings(path.read_text())]
              for name, path in DOCS.items()}
    cite = re.compile(r'docs/(benchmarks(?:_ros|_hypotheses|_sampling|_recording|_install|_solver|_arms)?\.md)[\s,(]+(?:section\s+)?"([^"]+)"')
    checked = 0
    for path in CITING:
        text = " ".join(re.sub(r"^\s*#\s?", "", path.read_text(), flags=re.M).split())
        for file, name in cite.findall(text):
            checked += 1
            assert any(t.startswith(name.rstrip(".,;")) for t in titles[file]), \
                f"{path.relative_to(ROOT)} cites docs/{file} \"{name}\", which has no such section"
    assert checked >= 5


def test_the_pages_read_as_references():
    """Issue 29: each figure once and current, with its command: no dated or lab-log headings, no
    heading twice across the pages, every section with a command that reproduces it."""
    texts = {name: path.read_text() for name, path in DOCS.items()}
    assert benchmarks_doc.structure_problems(texts) == []


#: Lines a benchmark page may have before it is split by job (the pages were 1029 / 674 lines
#: before the sampling and recording pages were split out).
MAX_PAGE_LINES = 700


def test_every_page_has_one_job_and_a_readable_length():
    for name, path in DOCS.items():
        n = len(path.read_text().splitlines())
        assert n <= MAX_PAGE_LINES, f"docs/{name} has {n} lines (> {MAX_PAGE_LINES}): split it by job"
    assert set(DOCS) == {"benchmarks.md"} | {getattr(benchmarks_doc, attr).name
                                              for attr, _ in benchmarks_doc.COMPANIONS}


def test_structure_problems_names_what_is_wrong():
    page = ("# B\n\n## Solver (2026-12-01)\n\n`python bench/bench_solver.py`\n\n"
            "## Poses (issue 30)\n\n`python bench/bench_pose_fig8.py`\n\n"
            "## Old run, superseded by the section above\n\nno command here\n\n"
            "## Plugin\n\n```\n## not a heading\n```\n    scripts/sim.sh --robot fr3\n")
    other = "# R\n\n## Plugin\n\n`ros2 launch gato_bringup hardware.launch.xml`\n"
    problems = benchmarks_doc.structure_problems({"a.md": page, "b.md": other})
    assert problems == ["a.md: 'Solver (2026-12-01)': a date in a heading (put when it was measured in the text)",
                        "a.md: 'Poses (issue 30)': an issue number in a heading (say it in the text)",
                        "a.md: 'Old run, superseded by the section above': a lab-log heading",
                        "a.md: 'Old run, superseded by the section above': no command that reproduces it",
                        "b.md: 'Plugin': the heading is also in a.md"]


def test_write_result_writes_its_own_file_and_refuses_the_docs(tmp_path):
    out = benchmarks_doc.write_result(tmp_path / "r.md", "\n## Plugin at 1 kHz\n\n| a |\n")
    assert out.read_text() == "## Plugin at 1 kHz\n\n| a |\n"
    benchmarks_doc.write_result(out, "## Again\n")
    assert out.read_text() == "## Again\n"          # a rerun replaces the result, never appends
    before = benchmarks_doc.MAIN.read_text()
    for doc in (benchmarks_doc.MAIN, benchmarks_doc.ROOT / "docs" / "new_page.md"):
        with pytest.raises(ValueError, match="do not write into docs/"):
            benchmarks_doc.write_result(doc, "## N\n")
    assert benchmarks_doc.MAIN.read_text() == before
    assert not (benchmarks_doc.ROOT / "docs" / "new_page.md").exists()
