"""The statements of the event log's readers, built once."""
