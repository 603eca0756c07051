"""Every validation rule of POST /functions, with the line (or item) it names."""

from __future__ import annotations

import hashlib

import pytest

from calcgraph.domain.builds.validation import (
    CODE_SIZE_LIMIT_BYTES,
    SubmissionLimits,
    ValidatedSubmission,
    validate_submission,
)
from calcgraph.domain.errors import FieldError, ValidationError

HANDLER = "def handler(x):\n    return {'y': x}\n"


def refusals(
    code: str | bytes, requirements: list[str] | None = None, handler: str = "main:handler"
) -> list[FieldError]:
    with pytest.raises(ValidationError) as caught:
        validate_submission(code, requirements or [], handler)
    return caught.value.errors


def only(code: str | bytes, requirements: list[str] | None = None) -> FieldError:
    errors = refusals(code, requirements)
    assert len(errors) == 1, [e.msg for e in errors]
    return errors[0]


class TestAccepted:
    def test_valid_submission_gives_what_the_build_needs(self) -> None:
        code = "import math\n\n" + HANDLER
        result = validate_submission(code, ["numpy==1.26.4", "pint>=0.24"], "main:handler")
        assert isinstance(result, ValidatedSubmission)
        assert result.source == code
        assert result.handler_module == "main"
        assert result.handler_callable == "handler"
        assert result.code_checksum == hashlib.sha256(code.encode()).hexdigest()
        assert result.size_bytes == len(code.encode())
        assert result.requirement_lines == ("numpy==1.26.4", "pint>=0.24")

    def test_a_byte_order_mark_is_accepted(self) -> None:
        result = validate_submission(b"\xef\xbb\xbf" + HANDLER.encode(), [], "main:handler")
        assert result.source == HANDLER
        assert validate_submission("\ufeff" + HANDLER, [], "main:handler").source == HANDLER

    @pytest.mark.parametrize(
        "code",
        [
            "handler = lambda x: x\n",
            "class handler:\n    pass\n",
            "from math import sqrt as handler\n",
            "try:\n    import fast as impl\nexcept ImportError:\n    def handler(x):\n"
            "        return x\n",
            "if True:\n    def handler(x):\n        return x\n",
            "handler: object = print\n",
            "a, (b, handler) = 1, (2, 3)\n",
        ],
    )
    def test_handler_may_be_bound_in_many_ways(self, code: str) -> None:
        validate_submission(code, [], "main:handler")

    @pytest.mark.parametrize(
        "code",
        [
            "import os_helpers\nimport sockets\nimport osmium\n",
            "import re\npattern = re.compile('x')\n",
            "from sys import path\nimport sys\nprint(sys.version)\n",
            "data = {'os': 'linux'}\nprint(data['os'])\n",
            "class Config:\n    os = 'linux'\n\nprint(Config.os)\n",
            "x = getattr(object, 'name', None)\n",
            "from . import os\n",
        ],
    )
    def test_look_alikes_are_not_refused(self, code: str) -> None:
        validate_submission(code + HANDLER, [], "main:handler")

    @pytest.mark.parametrize(
        "requirement",
        [
            "requests",
            "Pint[numpy]>=0.24,<1",
            "numpy==1.26.*",
            'tomli>=2; python_version < "3.11"',
            "  scipy ~= 1.13  ",
        ],
    )
    def test_requirement_forms(self, requirement: str) -> None:
        validate_submission(HANDLER, [requirement], "main:handler")


class TestSize:
    def test_code_of_one_megabyte_is_refused(self) -> None:
        code = HANDLER + "#" * (CODE_SIZE_LIMIT_BYTES - len(HANDLER))
        assert len(code.encode()) == 1_000_000
        error = only(code)
        assert error.loc == ("body", "code")
        assert error.msg.startswith("rule code-size: code is 1000000 bytes")

    def test_code_just_below_one_megabyte_is_accepted(self) -> None:
        code = HANDLER + "#" * (CODE_SIZE_LIMIT_BYTES - len(HANDLER) - 1)
        validate_submission(code, [], "main:handler")

    def test_size_counts_utf8_bytes_not_characters(self) -> None:
        # 500,000 two-byte characters are a million bytes.
        code = HANDLER + "#" + "é" * 500_000
        assert only(code).msg.startswith("rule code-size")

    def test_limits_come_from_the_caller(self) -> None:
        with pytest.raises(ValidationError) as caught:
            validate_submission(HANDLER, [], "main:handler", SubmissionLimits(10, 50))
        assert caught.value.errors[0].msg.startswith("rule code-size: code is")


class TestEncodingAndSyntax:
    def test_bytes_that_are_not_utf8_name_their_line(self) -> None:
        error = only(b"x = 1\ny = 2\nz = '\xff'\n" + HANDLER.encode())
        assert error.loc == ("body", "code", "line", 3)
        assert error.msg.startswith("rule code-encoding:")

    def test_lone_surrogate_in_text_is_an_encoding_refusal(self) -> None:
        error = only("x = 1\ny = '\ud800'\n" + HANDLER)
        assert error.loc == ("body", "code", "line", 2)
        assert error.msg.startswith("rule code-encoding:")

    def test_syntax_error_names_its_line(self) -> None:
        error = only(HANDLER + "\ndef broken(:\n    pass\n")
        assert error.loc == ("body", "code", "line", 4)
        assert error.msg.startswith("rule syntax:")
        assert error.msg.endswith("on line 4")

    def test_compiler_errors_count_as_syntax(self) -> None:
        error = only(HANDLER + "return 1\n")
        assert error.loc == ("body", "code", "line", 3)
        assert "'return' outside function" in error.msg

    def test_nul_character_names_its_line(self) -> None:
        error = only(HANDLER + "x = 1\0\n")
        assert error.loc == ("body", "code", "line", 3)
        assert error.msg.startswith("rule syntax:")

    def test_unparsable_code_skips_the_handler_rule(self) -> None:
        errors = refusals("def (:\n", handler="main:handler")
        assert [e.msg.split(":")[0] for e in errors] == ["rule syntax"]


class TestBlacklist:
    @pytest.mark.parametrize(
        ("line", "shown"),
        [
            ("import os", "'import os'"),
            ("import os.path", "'import os.path'"),
            ("import subprocess as sp", "'import subprocess as sp'"),
            ("import json, socket", "'import socket'"),
            ("from os import path", "'from os import path'"),
            ("from os.path import join as j", "'from os.path import join as j'"),
            ("from socket import *", "'from socket import *'"),
        ],
    )
    def test_blacklisted_imports_name_rule_and_line(self, line: str, shown: str) -> None:
        code = f"x = 1\n\n\n{line}\n" + HANDLER
        error = only(code)
        assert error.loc == ("body", "code", "line", 4)
        assert error.msg == f"rule blacklisted-import: {shown} on line 4"

    def test_call_of_eval(self) -> None:
        error = only(HANDLER + "value = eval('1 + 1')\n")
        assert error.loc == ("body", "code", "line", 3)
        assert error.msg == "rule eval-call: call of eval on line 3"

    def test_alias_of_eval(self) -> None:
        assert only(HANDLER + "e = eval\n").msg.startswith("rule eval-call: reference to eval")


class TestEvasions:
    @pytest.mark.parametrize(
        ("snippet", "fragment"),
        [
            ("__import__('o' + 's')", "call of __import__"),
            ("loader = __import__", "reference to __import__"),
            ("import importlib", "'import importlib'"),
            ("from importlib import import_module", "'from importlib import import_module'"),
            ("exec('print(1)')", "call of exec"),
            ("run = exec", "reference to exec"),
            ("code = compile('1', 'x', 'eval')", "call of compile"),
            ("import sys\nmods = sys.modules", "'sys.modules'"),
            ("import sys as s\nmods = s.modules", "'s.modules'"),
            ("from sys import modules", "'from sys import modules'"),
            ("import builtins", "'import builtins'"),
            ("from builtins import open", "'from builtins import open'"),
            ("b = __builtins__", "reference to __builtins__"),
            ("g = (lambda: 0).__globals__", "attribute '__globals__'"),
            ("k = ().__class__.__bases__[0].__subclasses__()", "attribute '__subclasses__'"),
            ("import ctypes", "'import ctypes'"),
            ("from ctypes import CDLL", "'from ctypes import CDLL'"),
            ("import posix", "'import posix'"),
            ("import pty", "'import pty'"),
            ("import _posixsubprocess", "'import _posixsubprocess'"),
            ("import math\nf = getattr(math, '__import__')", 'getattr(..., "__import__")'),
            ("import math\nf = getattr(math, 'system', None)", 'getattr(..., "system")'),
            ("b = globals()['__builtins__']", 'globals()["__builtins__"]'),
            ("import pathlib\npathlib.os.system('id')", "'pathlib.os'"),
            ("from email import utils as u\nu.socket.socket()", "'u.socket'"),
        ],
    )
    def test_evasion_is_refused_on_its_line(self, snippet: str, fragment: str) -> None:
        code = HANDLER + snippet + "\n"
        line = code.count("\n")
        errors = refusals(code)
        on_line = [e for e in errors if e.loc == ("body", "code", "line", line)]
        assert on_line, [e.msg for e in errors]
        assert any(e.msg.startswith("rule evasion:") and fragment in e.msg for e in on_line), [
            e.msg for e in errors
        ]
        assert all(e.msg.endswith(f"on line {line}") for e in on_line)


class TestHandler:
    @pytest.mark.parametrize(
        "handler", ["handler", "other:handler", "main:", "main:1x", "main:a.b", "main:class"]
    )
    def test_malformed_handler(self, handler: str) -> None:
        errors = refusals(HANDLER, handler=handler)
        assert [e.loc for e in errors] == [("body", "handler")]
        assert errors[0].msg.startswith("rule handler:")

    def test_missing_callable(self) -> None:
        errors = refusals("def helper():\n    def handler():\n        pass\n")
        assert [e.loc for e in errors] == [("body", "handler")]
        assert "defines no top-level 'handler'" in errors[0].msg

    def test_async_handler(self) -> None:
        errors = refusals("async def handler(x):\n    return x\n")
        assert "async" in errors[0].msg


class TestRequirements:
    def test_fifty_dependencies_are_refused(self) -> None:
        error = only(HANDLER, [f"pkg{i}" for i in range(50)])
        assert error.loc == ("body", "requirements")
        assert error.msg.startswith("rule dependency-count: 50 requirements")

    def test_forty_nine_dependencies_are_accepted(self) -> None:
        validate_submission(HANDLER, [f"pkg{i}" for i in range(49)], "main:handler")

    @pytest.mark.parametrize(
        ("item", "rule"),
        [
            ("numpy==", "requirement-syntax"),
            ("numpy = = 1", "requirement-syntax"),
            ("", "requirement-syntax"),
            ("numpy # the arrays", "requirement-syntax"),
            ("numpy\n--index-url https://evil.example/simple", "requirement-syntax"),
            ("--index-url https://evil.example/simple", "requirement-source"),
            ("-e .", "requirement-source"),
            ("-r other.txt", "requirement-source"),
            ("pkg @ https://example.invalid/pkg-1.0.whl", "requirement-source"),
            ("pkg @ file:///tmp/pkg", "requirement-source"),
            ("https://example.invalid/pkg-1.0.tar.gz", "requirement-source"),
            ("git+https://example.invalid/pkg.git", "requirement-source"),
            ("./vendor/pkg", "requirement-source"),
            ("/abs/pkg", "requirement-source"),
            ("pkg-1.0-py3-none-any.whl", "requirement-source"),
        ],
    )
    def test_malformed_items_name_rule_and_index(self, item: str, rule: str) -> None:
        error = only(HANDLER, ["pint", item])
        assert error.loc == ("body", "requirements", 1)
        assert error.msg.startswith(f"rule {rule}: requirements[1]")

    def test_duplicates_compare_normalised_names(self) -> None:
        error = only(HANDLER, ["Foo_Bar==1", "pint", "foo.bar>=1"])
        assert error.loc == ("body", "requirements", 2)
        assert error.msg.startswith("rule requirement-duplicate: requirements[2]")
        assert "already at requirements[0]" in error.msg

    def test_a_huge_item_is_shown_shortened(self) -> None:
        error = only(HANDLER, ["x" * 10_000 + "=="])
        assert len(error.msg) < 300


class TestEverythingAtOnce:
    def test_all_violations_are_reported_together_in_order(self) -> None:
        code = "import os\nimport json\nx = eval('1')\nexec('y')\n"
        with pytest.raises(ValidationError) as caught:
            validate_submission(code, ["ok", "--pre", "ok"], "main:handler")
        error = caught.value
        assert [e.loc for e in error.errors] == [
            ("body", "code", "line", 1),
            ("body", "code", "line", 3),
            ("body", "code", "line", 4),
            ("body", "handler"),
            ("body", "requirements", 1),
            ("body", "requirements", 2),
        ]
        rules = [e.msg.split(":")[0] for e in error.errors]
        assert rules == [
            "rule blacklisted-import",
            "rule eval-call",
            "rule evasion",
            "rule handler",
            "rule requirement-source",
            "rule requirement-duplicate",
        ]
        # The detail of the answer names the first rule and its line, and how many follow.
        assert error.message == (
            "submitted function refused: rule blacklisted-import: 'import os' on line 1 "
            "(and 5 more violations)"
        )
        assert str(error).startswith("ValidationError: ")

    def test_oversized_code_is_still_checked_for_requirements(self) -> None:
        errors = refusals("#" * CODE_SIZE_LIMIT_BYTES, ["a b"])
        assert [e.loc for e in errors] == [("body", "code"), ("body", "requirements", 0)]
