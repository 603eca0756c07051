"""The garbage collector of a long-lived server process, settled once its startup is done.

A full collection walks every tracked object of the process: modules, the GraphQL schema,
SQLAlchemy's mappers and caches, a few hundred thousand of them. Requests that build large
answers (a run of 1,000 nodes) promote enough objects to trigger one every few dozen requests,
and that request then pays a pause longer than the whole query (over 100 ms measured). Objects
alive after startup live as long as the process, so they are moved out of the collector's
generations (`gc.freeze`): a full collection then walks only what requests left behind. A
larger first-generation threshold lets short-lived request objects die young instead of being
promoted by the collections a 1,000-node answer would otherwise trigger every 700 allocations.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
_settled = False


def pause_until_settled() -> None:
    """No collections while a server starts: importing the application allocates a few
    hundred thousand objects that all live on, and the collections they trigger (full ones
    among them) cost a tenth of its import, for nothing to free. `settle` resumes them."""
    if not _settled:
        gc.disable()


def settle() -> None:
    """Once per process: collect, freeze what survived, raise the young threshold."""
    global _settled
    if _settled:
        return
    _settled = True
    gc.enable()
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)


def freeze_late() -> None:
    """Objects built once after start and kept for the process's life (the GraphQL schema,
    built lazily) leave the collector's generations too. No collection first: freezing alone
    is cheap, and what it also freezes of requests in flight is a few objects."""
    if _settled:
        gc.freeze()
