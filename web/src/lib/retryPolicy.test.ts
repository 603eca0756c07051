import { describe, expect, it } from "vitest";
import { MAX_RETRIES, MAX_WAIT_S, retryDelay } from "./retryPolicy";

const busy = { status: 200, code: "Unavailable", retryAfter: 1, mutation: false };

describe("retryDelay", () => {
  it("waits out a busy database on a query, as long as the server asked", () => {
    expect(retryDelay(busy, 0)).toBe(1);
    expect(retryDelay({ ...busy, retryAfter: 2.5 }, 1)).toBe(2.5);
  });

  it("tries a refused mutation again only when it was refused before its body was read", () => {
    expect(retryDelay({ ...busy, mutation: true }, 0)).toBeNull();
    expect(retryDelay({ status: 503, code: null, retryAfter: 1, mutation: true }, 0)).toBe(1);
    expect(retryDelay({ status: 429, code: "RateLimited", retryAfter: 2, mutation: true }, 0)).toBe(2);
  });

  it("gives up after a few tries, on long waits, without a named wait, and on other errors", () => {
    expect(retryDelay(busy, MAX_RETRIES)).toBeNull();
    expect(retryDelay({ ...busy, retryAfter: MAX_WAIT_S + 1 }, 0)).toBeNull();
    expect(retryDelay({ ...busy, retryAfter: null }, 0)).toBeNull();
    expect(retryDelay({ ...busy, code: "PermissionDenied" }, 0)).toBeNull();
    expect(retryDelay({ ...busy, code: null }, 0)).toBeNull();
  });
});
