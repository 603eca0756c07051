"""The database pool's defaults, declared once: the settings' defaults (`calcgraph.settings`) and
those of a Database built without settings, as tests build one. No imports: the settings read
them without loading SQLAlchemy."""

POOL_SIZE = 4
MAX_OVERFLOW = 0
POOL_TIMEOUT_S = 10.0
QUEUE_LIMIT = 64
SQLITE_BUSY_TIMEOUT_MS = 5000
