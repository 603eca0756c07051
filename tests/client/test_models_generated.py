"""The committed client models are what scripts/client_models.py generates from the served
OpenAPI document, as schema.graphql is what the schema exports (tests/graphql/test_sdl.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from calcgraph.client import models
from calcgraph.rest_compat.api import document

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "client_models", ROOT / "scripts/client_models.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_client_models_have_not_drifted() -> None:
    generated = _generator().render(document())
    assert (ROOT / "calcgraph/client/models.py").read_text() == generated, (
        "calcgraph/client/models.py is stale: run `.venv/bin/python scripts/client_models.py` "
        "and commit it"
    )


def test_a_changed_answer_shows_as_drift() -> None:
    """The comparison sees the document: a field the server adds appears in the models."""
    changed = document()
    changed = {**changed, "components": {"schemas": dict(changed["components"]["schemas"])}}
    run = dict(changed["components"]["schemas"]["RunOut"])
    run["properties"] = {**run["properties"], "priority": {"type": "integer"}}
    changed["components"]["schemas"]["RunOut"] = run
    generated = _generator().render(changed)
    assert "priority: int" in generated
    assert (ROOT / "calcgraph/client/models.py").read_text() != generated


def test_an_answer_that_extends_another_is_its_subclass() -> None:
    """A run is a run summary with its plan and states, as RunOut extends RunSummaryOut: the
    client's Run inherits the summary's fields and behaviour instead of repeating them."""
    assert issubclass(models.Run, models.RunSummary)
    assert set(models.RunSummary.model_fields) < set(models.Run.model_fields)
    assert issubclass(models.FunctionDetail, models.Function)
    assert issubclass(models.WorkflowDetail, models.Workflow)


def test_an_extension_whose_inherited_fields_differ_is_refused() -> None:
    """Were a run's `status` to differ from its summary's, the run would not be a summary:
    the generation stops rather than make a subclass that misstates a field."""
    changed = document()
    changed = {**changed, "components": {"schemas": dict(changed["components"]["schemas"])}}
    run = dict(changed["components"]["schemas"]["RunOut"])
    run["properties"] = {**run["properties"], "status": {"type": "integer"}}
    changed["components"]["schemas"]["RunOut"] = run
    with pytest.raises(SystemExit, match="Run does not extend RunSummary"):
        _generator().render(changed)


def test_the_models_read_what_the_client_did() -> None:
    """Rules of the generation: a schema the client does not name reads as a plain object, an
    enumeration as a string, unknown fields are kept, an absent field takes the client's value,
    and the behaviours stay."""
    job = models.Job.model_validate(
        {
            "id": "j",
            "function_id": "f",
            "function_version_id": "v",
            "package_id": "p",
            "status": "a-status-of-a-newer-server",
            "inputs": {},
            "outputs": None,
            "error": {"kind": "timeout", "message": "too slow", "limit_s": 30},
            "logs": None,
            "cache_hit": False,
            "workflow_run_id": None,
            "node_key": None,
            "created_at": "2026-01-02T03:04:05Z",
            "started_at": None,
            "finished_at": None,
            "outputs_omitted": False,
            "inputs_omitted": False,
            "queue": "later-field",
        }
    )
    assert job.error == {"kind": "timeout", "message": "too slow", "limit_s": 30}
    assert job.model_dump()["queue"] == "later-field"
    assert not job.done
    # A field some answers leave out reads as the client's value for its absence.
    assert models.ExecuteResult.model_validate({"job_id": "j", "status": "queued"}).warnings == []
    hook = {"id": "w", "url": "https://h", "types": ["calcgraph.*"], "description": ""}
    hook |= {"enabled": True, "created_at": "2026-01-02T03:04:05+00:00"}
    assert models.Webhook.model_validate(hook).secret is None
    assert models.Compatibility(
        compatibility="ALLOWED", reason="", source="Force", target="Numeric"
    ).allowed
