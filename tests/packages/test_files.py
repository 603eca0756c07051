"""Package files are staged by sandboxes: only safe relative paths are accepted."""

from __future__ import annotations

import pytest

from calcgraph.domain.errors import ValidationError
from calcgraph.domain.packages.files import clean_files


def test_paths_are_normalised_and_encoded() -> None:
    assert clean_files({"./a/b.py": "x = 1\n", "c\\d.py": b"y"}) == {
        "a/b.py": b"x = 1\n",
        "c/d.py": b"y",
    }


@pytest.mark.parametrize("path", ["../x.py", "/etc/passwd", "a//b.py", "a/./b.py", "", "a/.."])
def test_unsafe_paths_are_refused(path: str) -> None:
    with pytest.raises(ValidationError) as refused:
        clean_files({path: "x", "ok.py": "y"})
    assert [e.loc for e in refused.value.errors] == [("files", path)]
