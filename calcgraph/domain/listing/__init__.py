"""Listings: limits and opaque cursors (paging, pure), the keyset condition as SQL, and the reads
every repository of views shares."""
