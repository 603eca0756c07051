"""The bundled demo: a cantilever-beam engineering package and a workflow over it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEMO_DIR = Path(__file__).resolve().parent
PACKAGE_DIR = DEMO_DIR / "package"
WORKFLOW_FILE = DEMO_DIR / "workflow.json"


def package_files() -> dict[str, str]:
    """The package's files as a publish request carries them: path to source text."""
    return {
        path.name: path.read_text()
        for path in sorted(PACKAGE_DIR.iterdir())
        if path.suffix in {".py", ".yaml"}
    }


def workflow_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(WORKFLOW_FILE.read_text())
    return document


# Inputs of the demo run: a 3 m steel cantilever with a 12 kN tip load.
DEMO_INPUTS: dict[str, Any] = {
    "span": {"value": 3, "unit": "m"},
    "load": {"value": 12, "unit": "kN"},
    "youngs_modulus": {"value": 210, "unit": "GPa"},
    "second_moment": 8.356e-5,
    "section_modulus": {"value": 557, "unit": "cm**3"},
    "yield_stress": {"value": 355, "unit": "MPa"},
}
