"""Generates calcgraph/client/models.py from the REST door's OpenAPI document (/openapi.json)
with datamodel-code-generator, so the client's answer models are the server's, written once:

    .venv/bin/python scripts/client_models.py          # rewrite calcgraph/client/models.py
    .venv/bin/python scripts/client_models.py --check  # exit 1 when the committed file differs

tests/client/test_models_generated.py fails when the committed file is not what this makes.

The client reads answers leniently, so that a newer server never breaks an older client; the
document is adapted to that before generation, by four rules:
- each answer the client names (CLIENT_NAMES) becomes a model under the client's name, on
  `model_base.Model` (unknown fields kept) or the base CLIENT_BASES gives (`done`, `allowed`);
- a schema the client does not name (a job's error, a validation report, ...) is read as a plain
  JSON object (`dict[str, Any]`), as the client has always given it;
- an enumeration is read as a string (a newer server may add a status);
- a field some answers leave out (CLIENT_ABSENT) has the client's value for its absence;
- `Page[...]` is the hand-written generic `model_base.Page`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from datamodel_code_generator import DataModelType, InputFileType, PythonVersion, generate
from datamodel_code_generator.format import Formatter

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "calcgraph" / "client" / "models.py"
REF = "#/components/schemas/"
BASE = "calcgraph.client.model_base"

# The document's answer schema -> the client's model name (its public API).
CLIENT_NAMES = {
    "Health": "Health",
    "ConnectionOut": "Compatibility",
    "UserOut": "User",
    "UsageOut": "UserUsage",
    "QuotasOut": "Quotas",
    "UsageReportOut": "UsageReport",
    "MemberOut": "Member",
    "OrganizationOut": "Organization",
    "LoginStartOut": "LoginStart",
    "LoginResultOut": "LoginResult",
    "FunctionDeploymentOut": "FunctionDeployment",
    "DeploymentReportOut": "DeploymentReport",
    "InterfaceChangeOut": "InterfaceChange",
    "PackageDiffOut": "PackageDiff",
    "PackageOut": "Package",
    "FunctionOut": "Function",
    "FunctionDetailOut": "FunctionDetail",
    "ExecuteOut": "ExecuteResult",
    "JobOut": "Job",
    "WorkflowOut": "Workflow",
    "WorkflowDetailOut": "WorkflowDetail",
    "ValidateOut": "WorkflowValidation",
    "NodeStateOut": "NodeState",
    "RunSummaryOut": "RunSummary",
    "RunOut": "Run",
    "PlanOut": "RunPlan",
    "EventOut": "Event",
    "EventPageOut": "EventPage",
    "WebhookCreatedOut": "Webhook",
    "DeliveryOut": "Delivery",
}
# Fields that some answers leave out, with the value the client then gives them (a webhook's
# secret is in the answer that created it only; an execute answer has warnings only when the
# function version is deprecated).
CLIENT_ABSENT: dict[str, dict[str, Any]] = {
    "Webhook": {"secret": None},
    "ExecuteResult": {"warnings": []},
}
# Models with behaviour beyond their fields (model_base's mixins on its `Model`).
CLIENT_BASES = {
    "Compatibility": f"{BASE}.CompatibilityModel",
    "ExecuteResult": f"{BASE}.JobModel",
    "Job": f"{BASE}.JobModel",
    "RunSummary": f"{BASE}.RunModel",
}
# Answers that extend another as the server's wire models do (RunOut(RunSummaryOut), ...): the
# client's model is the other's subclass, with the fields it adds, rather than a copy of them.
CLIENT_EXTENDS = {
    "Run": "RunSummary",
    "FunctionDetail": "Function",
    "WorkflowDetail": "Workflow",
}
HEADER = (
    '"""Typed answers of the REST API, generated from /openapi.json by scripts/client_models.py\n'
    "(do not edit: change the server's wire models and run it). Every model keeps the fields it\n"
    'does not name (`model_base.Model`), so a newer server never breaks an older client."""'
)
# Listings answer `Page[<model>]`: the generic page is model_base's, named here too.
REEXPORT_AFTER = "from __future__ import annotations\n"
REEXPORT = f"from {BASE} import Page as Page\n"
FREE_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}


def _adapt(node: Any) -> Any:
    """A schema node as the client reads it (the rules of the module's docstring)."""
    if isinstance(node, list):
        return [_adapt(item) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(REF):
        name = ref.removeprefix(REF)
        if name in CLIENT_NAMES:
            return {**node, "$ref": REF + CLIENT_NAMES[name]}
        return dict(FREE_OBJECT)
    adapted: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "$defs"):  # names, not keywords: kept whatever they are
            adapted[key] = {name: _adapt(schema) for name, schema in value.items()}
        elif key not in ("enum", "title"):
            adapted[key] = _adapt(value)
    return adapted


def client_document(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document reduced to the client's answers, adapted to its reading."""
    schemas = document["components"]["schemas"]
    missing = sorted(set(CLIENT_NAMES) - set(schemas))
    if missing:
        raise SystemExit(f"the document has no schema {missing}: update CLIENT_NAMES")
    client = {
        CLIENT_NAMES[name]: _absent(CLIENT_NAMES[name], _adapt(schemas[name]))
        for name in sorted(CLIENT_NAMES, key=CLIENT_NAMES.__getitem__)
    }
    for model, parent in CLIENT_EXTENDS.items():
        client[model] = _extending(model, client[model], parent, client[parent])
    return {
        "openapi": document["openapi"],
        "info": document["info"],
        "paths": {},
        "components": {"schemas": client},
    }


def _extending(
    model: str, schema: dict[str, Any], parent: str, inherited: dict[str, Any]
) -> dict[str, Any]:
    """`schema` as `parent` (allOf) plus the fields it adds; the parent's fields must come first
    and be the same, as a subclass's do."""
    properties = schema["properties"]
    own = list(properties)[len(inherited["properties"]) :]
    if list(properties)[: len(inherited["properties"])] != list(inherited["properties"]) or any(
        properties[name] != spec for name, spec in inherited["properties"].items()
    ):
        raise SystemExit(f"{model} does not extend {parent}: update CLIENT_EXTENDS")
    added: dict[str, Any] = {
        "type": "object",
        "properties": {name: properties[name] for name in own},
        "required": [name for name in schema.get("required", ()) if name in own],
    }
    rest = {k: v for k, v in schema.items() if k not in ("properties", "required", "type")}
    return {**rest, "allOf": [{"$ref": REF + parent}, added]}


def _absent(model: str, schema: dict[str, Any]) -> dict[str, Any]:
    absent = CLIENT_ABSENT.get(model, {})
    if not absent:
        return schema
    properties = dict(schema["properties"])
    for name, value in absent.items():
        prop = properties[name]
        if value is None and "anyOf" not in prop:
            prop = {"anyOf": [prop, {"type": "null"}]}
        properties[name] = {**prop, "default": value}
    required = [name for name in schema.get("required", ()) if name not in absent]
    return {**schema, "properties": properties, "required": required}


def render(document: dict[str, Any]) -> str:
    """models.py as datamodel-code-generator writes it for the document."""
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "models.py"
        generate(
            json.dumps(client_document(document)),
            input_file_type=InputFileType.OpenAPI,
            output=output,
            output_model_type=DataModelType.PydanticV2BaseModel,
            target_python_version=PythonVersion.PY_311,
            base_class=f"{BASE}.Model",
            base_class_map=CLIENT_BASES,
            custom_file_header=HEADER,
            disable_timestamp=True,
            use_schema_description=True,
            strict_nullable=True,
            formatters=[Formatter.BUILTIN],
            use_standard_collections=True,
            use_union_operator=True,
            use_double_quotes=True,
            keep_model_order=True,
            field_constraints=True,
            use_annotated=False,
        )
        return _ruff(output.read_text().replace(REEXPORT_AFTER, REEXPORT_AFTER + REEXPORT, 1))


def _ruff(text: str) -> str:
    """The text as the project's ruff writes models.py (its settings, from pyproject.toml)."""
    ruff = [sys.executable, "-m", "ruff"]
    name = ["--stdin-filename", str(MODELS.relative_to(ROOT))]
    for step in (["check", "--fix-only", "--exit-zero", "-q"], ["format", "-q"]):
        text = subprocess.run(
            [*ruff, *step, *name, "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    return text


def server_document() -> dict[str, Any]:
    from calcgraph.rest_compat.api import document

    return document()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when models.py is stale")
    args = parser.parse_args(argv)
    text = render(server_document())
    if args.check:
        if MODELS.read_text() != text:
            sys.stderr.write(f"{MODELS} is stale: run scripts/client_models.py\n")
            return 1
        return 0
    MODELS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
