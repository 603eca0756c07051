"""POST /types/check-connection and GET /types over HTTP: public, with contract errors."""

from __future__ import annotations

import httpx
import pytest


class TestCheckConnection:
    async def test_allowed_needs_no_token(self, client: httpx.AsyncClient) -> None:
        response = await client.post(
            "/types/check-connection", json={"source": "Force", "target": "Numeric"}
        )
        assert response.status_code == 200
        assert response.json()["compatibility"] == "ALLOWED"
        assert "Force -> Float -> Numeric" in response.json()["reason"]

    async def test_refused(self, client: httpx.AsyncClient) -> None:
        response = await client.post(
            "/types/check-connection", json={"source": "Force", "target": "Length"}
        )
        assert response.status_code == 200
        assert response.json()["compatibility"] == "REFUSED"

    async def test_inline_struct_as_json_object(self, client: httpx.AsyncClient) -> None:
        response = await client.post(
            "/types/check-connection",
            json={"source": {"a": "Force", "b": "Length"}, "target": {"a": "Float"}},
        )
        assert response.json()["compatibility"] == "REFUSED"
        assert "'b'" in response.json()["reason"]

    @pytest.mark.parametrize(
        ("body", "loc", "fragment"),
        [
            ({"source": "Forc", "target": "Float"}, ["body", "source"], "did you mean 'Force'"),
            ({"source": "Force", "target": "list["}, ["body", "target"], "position 5"),
            ({"source": "Force"}, ["body", "target"], "Field required"),
            ({"source": 12, "target": "Float"}, ["body", "source"], "type expression is a string"),
            (
                {"source": "Force", "target": "Float", "sauce": 1},
                ["body", "sauce"],
                "Extra inputs",
            ),
            ([1, 2], ["body"], "valid dictionary"),
        ],
    )
    async def test_bad_input_is_422_naming_the_field(
        self, client: httpx.AsyncClient, body: object, loc: list[str], fragment: str
    ) -> None:
        response = await client.post("/types/check-connection", json=body)
        assert response.status_code == 422
        payload = response.json()
        assert payload["detail"].startswith("ValidationError: ")
        assert any(e["loc"] == loc and fragment in e["msg"] for e in payload["errors"]), payload

    async def test_both_bad_fields_reported_together(self, client: httpx.AsyncClient) -> None:
        response = await client.post(
            "/types/check-connection", json={"source": "Forc", "target": "Lenght"}
        )
        locs = [e["loc"] for e in response.json()["errors"]]
        assert locs == [["body", "source"], ["body", "target"]]

    @pytest.mark.parametrize(
        ("content", "fragment"),
        [
            (b"{not json", "not valid JSON"),
            (b"", "empty"),
            (b"\xff\xfe", "not valid JSON"),
        ],
    )
    async def test_unparsable_body_is_422(
        self, client: httpx.AsyncClient, content: bytes, fragment: str
    ) -> None:
        response = await client.post("/types/check-connection", content=content)
        assert response.status_code == 422
        assert fragment in response.json()["detail"]


class TestListTypes:
    async def test_catalog_with_units_and_parents(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/types")
        assert response.status_code == 200
        by_name = {t["name"]: t for t in response.json()["items"]}
        assert by_name["Force"] == {
            "name": "Force",
            "parent": "Float",
            "kind": "physical",
            "unit": "N",
            "shape": None,
            "description": "",
        }
        assert by_name["Moment"]["unit"] == "N·m"
        assert by_name["Torsor"]["kind"] == "composite"
        assert by_name["Integer"]["parent"] == "Numeric"
        physical = [t for t in by_name.values() if t["kind"] == "physical"]
        assert len(physical) == 17
