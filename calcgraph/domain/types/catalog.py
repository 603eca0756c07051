"""The shared catalog of physical types: scalars, physical scalars with SI units, composites.

Pure data. The hierarchy is a forest: every named type has at most one parent, and the
compatibility rule follows ancestor/descendant chains in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["scalar", "physical", "composite"]


@dataclass(frozen=True)
class TypeDef:
    name: str
    parent: str | None
    kind: Kind
    unit: str | None = None
    """SI unit of a physical scalar, in pint notation."""
    unit_symbol: str | None = None
    """The same unit as the specification writes it."""
    shape: str | None = None
    """Human description of a composite's shape."""
    description: str = ""


_SCALARS = [
    TypeDef("Numeric", None, "scalar", description="any number (root of the numeric tree)"),
    TypeDef("Integer", "Numeric", "scalar", description="a whole number"),
    TypeDef("Float", "Numeric", "scalar", description="a real number"),
    TypeDef("Boolean", None, "scalar", description="true or false"),
    TypeDef("String", None, "scalar", description="text"),
]

# name, pint unit, symbol as the specification writes it
_PHYSICAL = [
    ("Length", "m", "m"),
    ("Area", "m**2", "m²"),
    ("Volume", "m**3", "m³"),
    ("Mass", "kg", "kg"),
    ("Density", "kg/m**3", "kg/m³"),
    ("Time", "s", "s"),
    ("Frequency", "Hz", "Hz"),
    ("Angle", "rad", "rad"),
    ("Acceleration", "m/s**2", "m/s²"),
    ("Force", "N", "N"),
    ("Moment", "N*m", "N·m"),
    ("Pressure", "Pa", "Pa"),
    ("Stress", "Pa", "Pa"),
    ("Temperature", "K", "K"),
    ("Energy", "J", "J"),
    ("Power", "W", "W"),
    ("Velocity", "m/s", "m/s"),
]

_COMPOSITES = [
    TypeDef("Vector3", None, "composite", shape="[x, y, z], three Float"),
    # Force3 and Moment3 refine Vector3 the way Force refines Float: the same shape with a unit.
    TypeDef("Force3", "Vector3", "composite", shape="[x, y, z], three Force"),
    TypeDef("Moment3", "Vector3", "composite", shape="[x, y, z], three Moment"),
    TypeDef("Torsor", None, "composite", shape="{force: Force3, moment: Moment3}"),
    TypeDef("Matrix", None, "composite", shape="2D array of Float (rows of equal length)"),
]

CATALOG: dict[str, TypeDef] = {
    t.name: t
    for t in [
        *_SCALARS,
        *(
            TypeDef(name, "Float", "physical", unit=unit, unit_symbol=symbol)
            for name, unit, symbol in _PHYSICAL
        ),
        *_COMPOSITES,
    ]
}

# Element type of the fixed-length triples, used to validate values.
TRIPLE_ELEMENT = {"Vector3": "Float", "Force3": "Force", "Moment3": "Moment"}
# Field types of the struct-shaped composite, used to compare it with inline structs.
TORSOR_FIELDS = {"force": "Force3", "moment": "Moment3"}


def ancestors(name: str) -> list[str]:
    """The chain from `name` up to its root, `name` first."""
    chain = [name]
    parent = CATALOG[name].parent
    while parent is not None:
        chain.append(parent)
        parent = CATALOG[parent].parent
    return chain
