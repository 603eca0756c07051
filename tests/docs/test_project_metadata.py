"""Issues 15 and 29: `pyproject.toml` says who made calcgraph, under which terms (Apache-2.0,
PEP 639: a licence expression and the licence files, no licence classifiers, which setuptools
deprecates), and where its documentation is; every address it names exists inside the
repository."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_license_authors_classifiers_and_urls() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert project["authors"]
    assert all(author.get("name") for author in project["authors"])
    classifiers = project["classifiers"]
    assert not any(c.startswith("License :: ") for c in classifiers)
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert "Typing :: Typed" in classifiers
    urls = project["urls"]
    assert "Documentation" in urls
    for url in urls.values():
        assert "://" not in url, f"{url} names a host outside the repository"
        assert (ROOT / url.split("#")[0]).exists(), url


def test_the_build_system_supports_the_licence_metadata() -> None:
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    assert "setuptools>=77" in build["requires"]  # the first to read PEP 639's fields
