"""Every actor module is imported here, so the registry of actors is explicit.

Kept out of `calcgraph/workers/__init__.py` so that importing an actor module first (which
imports `calcgraph.workers.broker`) never meets a half-initialised package.
"""

from calcgraph.builds import retention_actor
from calcgraph.workers import chains, jobs

ACTORS = [*jobs.ACTORS, *chains.ACTORS, *retention_actor.ACTORS]
