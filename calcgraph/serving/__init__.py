"""The process that serves: uvicorn (`server`), the application answering while it starts
(`starting`), endpoints built on first use (`lazy`) and the per-caller rate limit (`ratelimit`)."""
