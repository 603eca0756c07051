import { describe, expect, it } from "vitest";
import { retryAfterSeconds } from "./retryAfter";

describe("retryAfterSeconds", () => {
  it("reads delta-seconds from the header", () => {
    expect(retryAfterSeconds("5", null)).toBe(5);
    expect(retryAfterSeconds(" 2.5 ", null)).toBe(2.5);
  });
  it("reads an HTTP date as the time left", () => {
    const now = Date.parse("Fri, 27 Nov 2026 18:00:00 GMT");
    expect(retryAfterSeconds("Fri, 27 Nov 2026 18:00:07 GMT", null, now)).toBe(7);
    expect(retryAfterSeconds("Fri, 27 Nov 2026 17:59:00 GMT", null, now)).toBe(0);
  });
  it("falls back to retry_after of a body or a GraphQL error's extensions", () => {
    expect(retryAfterSeconds(null, { code: "Unavailable", retry_after: 3 })).toBe(3);
    expect(retryAfterSeconds("", { retry_after: "4" })).toBe(4);
    expect(retryAfterSeconds("9", { retry_after: 3 })).toBe(9);
  });
  it("is null when the server named no wait, or nonsense", () => {
    expect(retryAfterSeconds(null, null)).toBeNull();
    expect(retryAfterSeconds("soon", { retry_after: -1 })).toBeNull();
    expect(retryAfterSeconds(undefined, { code: "Unavailable" })).toBeNull();
  });
});
