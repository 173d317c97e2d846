"""docs/benchmarks.md and its companions (docs/benchmarks_ros.md, docs/benchmarks_hypotheses.md)
stay navigable: the index at the top of docs/benchmarks.md lists every section of every file, and a
text of the repository that names a section of one of them ("docs/benchmarks.md, section
"Sampling planner"") names one that exists in that file."""
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import benchmarks_doc  # noqa: E402

DOCS = {"benchmarks.md": benchmarks_doc.MAIN, "benchmarks_ros.md": benchmarks_doc.ROS,
        "benchmarks_hypotheses.md": benchmarks_doc.HYP}
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
    links = re.findall(r"\]\(((?:benchmarks_(?:ros|hypotheses)\.md)?)#([^)]+)\)", block)
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
    cite = re.compile(r'docs/(benchmarks(?:_ros|_hypotheses)?\.md)[\s,(]+(?:section\s+)?"([^"]+)"')
    checked = 0
    for path in CITING:
        text = " ".join(re.sub(r"^\s*#\s?", "", path.read_text(), flags=re.M).split())
        for file, name in cite.findall(text):
            checked += 1
            assert any(t.startswith(name.rstrip(".,;")) for t in titles[file]), \
                f"{path.relative_to(ROOT)} cites docs/{file} \"{name}\", which has no such section"
    assert checked >= 5


def test_append_section_appends_and_lists_the_new_section(tmp_path, monkeypatch):
    main = tmp_path / "benchmarks.md"
    ros = tmp_path / "benchmarks_ros.md"
    hyp = tmp_path / "benchmarks_hypotheses.md"
    main.write_text(f"# B\n\n{benchmarks_doc.INDEX_START}\n{benchmarks_doc.INDEX_END}\n\n## Old (1)\n\nx\n")
    ros.write_text("# R\n")
    hyp.write_text("# H\n")
    monkeypatch.setattr(benchmarks_doc, "MAIN", main)
    monkeypatch.setattr(benchmarks_doc, "ROS", ros)
    monkeypatch.setattr(benchmarks_doc, "HYP", hyp)
    benchmarks_doc.append_section(hyp, "\n## Payload (s)\n")
    assert "- [Payload (s)](benchmarks_hypotheses.md#payload-s)\n" in main.read_text()
    benchmarks_doc.append_section(ros, "\n## Plugin at 1 kHz (2026-12-02)\n\n| a |\n")
    benchmarks_doc.append_section(main, "\n## Old (1)\n\ny\n")
    assert ros.read_text() == "# R\n\n## Plugin at 1 kHz (2026-12-02)\n\n| a |\n"
    text = main.read_text()
    assert text.endswith("## Old (1)\n\nx\n\n## Old (1)\n\ny\n")
    assert "- [Old (1)](#old-1)\n- [Old (1)](#old-1-1)\n" in text
    assert "- [Plugin at 1 kHz (2026-12-02)](benchmarks_ros.md#plugin-at-1-khz-2026-12-02)\n" in text
    other = tmp_path / "notes.md"
    benchmarks_doc.append_section(other, "## N\n")
    assert other.read_text() == "## N\n" and main.read_text() == text
