"""Properties of the validator: nothing a client sends crashes it, and valid code passes."""

from __future__ import annotations

import keyword

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calcgraph.domain.builds.validation import ValidatedSubmission, validate_submission
from calcgraph.domain.errors import ValidationError

# Two shared cores: enough examples to find crashes in the decoding and parsing paths, not more.
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(code: str | bytes, requirements: list[str], handler: str) -> ValidatedSubmission | None:
    """The result, or None when refused; any other exception fails the property."""
    try:
        return validate_submission(code, requirements, handler)
    except ValidationError as error:
        refusal = error
    assert refusal.errors, "a refusal names at least one rule"
    for field_error in refusal.errors:
        assert field_error.loc[0] == "body"
        assert field_error.msg.startswith("rule ")
    return None


python_ish = st.lists(
    st.sampled_from(
        [
            "def ",
            "handler",
            "(",
            ")",
            ":",
            "\n",
            "    ",
            "return ",
            "x",
            "import ",
            "os",
            "eval",
            "exec",
            "'",
            '"',
            "\\",
            "\0",
            "#",
            "lambda",
            "[",
            "]",
            "{",
            "}",
            "=",
            ".",
            "from ",
            " import ",
            "__import__",
            "sys.modules",
            "\t",
            "\r",
            "é",
            "\ud800",
            "1e99",
            "0x",
            "*",
            "async ",
            "await ",
            "yield ",
            "class ",
            "@",
            "getattr(",
            ",",
        ]
    ),
    max_size=60,
).map("".join)


@PROPERTY
@given(st.binary(max_size=2048))
def test_random_bytes_never_crash(code: bytes) -> None:
    outcome(code, [], "main:handler")


@PROPERTY
@given(st.text(max_size=2048))
def test_random_text_never_crashes(code: str) -> None:
    outcome(code, [], "main:handler")


@PROPERTY
@given(python_ish)
def test_python_like_text_never_crashes(code: str) -> None:
    outcome(code, [], "main:handler")


@PROPERTY
@given(st.lists(st.text(max_size=60), max_size=8), st.text(max_size=30))
def test_random_requirements_and_handlers_never_crash(
    requirements: list[str], handler: str
) -> None:
    outcome("def handler():\n    return 1\n", requirements, handler)


identifiers = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True).filter(
    lambda name: (
        not keyword.iskeyword(name)
        and name not in {"eval", "exec", "compile", "__import__", "__builtins__"}
    )
)
safe_modules = st.sampled_from(["math", "json", "re", "itertools", "statistics", "fractions"])
literals = st.one_of(
    st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)
)
project_names = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,10}", fullmatch=True)


@PROPERTY
@given(
    name=identifiers,
    helpers=st.lists(st.tuples(identifiers, literals), max_size=5),
    modules=st.lists(safe_modules, max_size=3),
    projects=st.lists(project_names, max_size=10, unique_by=str.lower),
    versions=st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)), min_size=10, max_size=10),
)
def test_valid_code_passes(
    name: str,
    helpers: list[tuple[str, object]],
    modules: list[str],
    projects: list[str],
    versions: list[tuple[int, int]],
) -> None:
    lines = [f"import {module}" for module in modules]
    lines += [f"{helper} = {value!r}" for helper, value in helpers]
    lines += [f"def {name}(value, scale=2):", "    return {'out': value * scale}"]
    code = "\n".join(lines) + "\n"
    requirements = [
        f"{p}=={major}.{minor}"
        for p, (major, minor) in zip(projects, versions[: len(projects)], strict=True)
    ]
    result = validate_submission(code, requirements, f"main:{name}")
    assert result.handler_callable == name
    assert len(result.requirements) == len(projects)
