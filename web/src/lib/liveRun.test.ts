import { describe, expect, it } from "vitest";
import { advance, concernsRun, earliestRetryAt, type RunState } from "./liveRun";

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

describe("advance", () => {
  const state = (id: string, revision: number, status = "running") =>
    ({ id, revision, status, completedAt: null, terminalOutputs: null, errorMessage: null, firstFailedNodeKey: null, nodeStates: [] }) as RunState;

  it("takes the first state and any newer or equal revision of the same run", () => {
    const first = state("r1", 3);
    expect(advance(null, first)).toBe(first);
    const newer = state("r1", 4, "completed");
    expect(advance(first, newer)).toBe(newer);
    const same = state("r1", 3);
    expect(advance(first, same)).toBe(same);
  });

  it("keeps a newer state when an older answer arrives late", () => {
    const newer = state("r1", 5, "completed");
    expect(advance(newer, state("r1", 4))).toBe(newer);
  });

  it("takes another run's state whatever its revision", () => {
    const other = state("r2", 0);
    expect(advance(state("r1", 9), other)).toBe(other);
  });
});
