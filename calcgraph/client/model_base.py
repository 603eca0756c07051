"""What the generated answer models (`models.py`) stand on: the lenient base, the generic page
and the few behaviours beyond fields. Hand-written; scripts/client_models.py names them."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict

RUN_TERMINAL = frozenset({"completed", "failed", "cancelled"})
JOB_TERMINAL = frozenset({"success", "failed"})


class Model(BaseModel):
    """Accepts fields it does not name (`extra="allow"`, kept on the instance and in
    `model_dump()`), so a newer server never breaks an older client."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


T = TypeVar("T", bound=Model)


class Page(Model, Generic[T]):
    """One page of a listing; pass `next_cursor` back as `cursor` for the next page."""

    items: list[T]
    next_cursor: str | None = None


class JobModel(Model):
    status: str

    @property
    def done(self) -> bool:
        return self.status in JOB_TERMINAL


class RunModel(Model):
    status: str

    @property
    def done(self) -> bool:
        return self.status in RUN_TERMINAL


class CompatibilityModel(Model):
    compatibility: str

    @property
    def allowed(self) -> bool:
        return self.compatibility == "ALLOWED"
