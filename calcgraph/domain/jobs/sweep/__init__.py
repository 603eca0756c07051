"""The sweeper's round over the job store (`service`, its SQL in `repository`)."""
