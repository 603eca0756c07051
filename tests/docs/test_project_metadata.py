"""Issue 15: `pyproject.toml` says who made calcgraph, under which terms, and where its
documentation is; every address it names exists inside the repository."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_license_authors_classifiers_and_urls() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    license_file = ROOT / project["license"]["file"]
    assert license_file.read_text().strip()
    assert project["authors"]
    assert all(author.get("name") for author in project["authors"])
    classifiers = project["classifiers"]
    assert any(c.startswith("License :: ") for c in classifiers)
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Typing :: Typed" in classifiers
    urls = project["urls"]
    assert "Documentation" in urls
    for url in urls.values():
        assert "://" not in url, f"{url} names a host outside the repository"
        assert (ROOT / url.split("#")[0]).exists(), url
