"""Write the GraphQL schema as SDL: `python -m calcgraph.schema.export > schema.graphql`.

The SDL is committed so that schema changes show up in review; a test fails on drift.
"""

from __future__ import annotations

import sys

from calcgraph.schema.build import build_schema


def sdl() -> str:
    return build_schema().as_str() + "\n"


if __name__ == "__main__":
    sys.stdout.write(sdl())
