"""Operations: metrics, structured logs with request ids, rate limits."""
