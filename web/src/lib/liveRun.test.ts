import { describe, expect, it } from "vitest";
import { concernsRun, earliestRetryAt } from "./liveRun";

describe("concernsRun", () => {
  it("matches job and run events of this run only", () => {
    expect(concernsRun({ run_id: "r1", job_id: "j" }, "r1")).toBe(true);
    expect(concernsRun({ run_id: "r2" }, "r1")).toBe(false);
    expect(concernsRun({ run_id: null }, "r1")).toBe(false);
    expect(concernsRun(null, "r1")).toBe(false);
    expect(concernsRun("r1", "r1")).toBe(false);
  });
});

describe("earliestRetryAt", () => {
  it("is the earliest retry of the nodes, or null", () => {
    expect(earliestRetryAt([])).toBeNull();
    expect(earliestRetryAt([{ retryAt: null }])).toBeNull();
    expect(
      earliestRetryAt([
        { retryAt: "2026-11-27T18:00:10Z" },
        { retryAt: null },
        { retryAt: "2026-11-27T18:00:05Z" },
      ]),
    ).toBe("2026-11-27T18:00:05Z");
  });
});
