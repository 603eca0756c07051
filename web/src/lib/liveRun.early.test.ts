import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { firstRead, readRunEarly } from "./liveRun";

// The start-up read of a run page (readRunEarly) and its one use by the page (firstRead): what
// goes over the wire, counted at fetch.
describe("readRunEarly and firstRead", () => {
  const runsRead: string[] = [];
  const plansRead: string[] = [];
  beforeEach(() => {
    runsRead.length = 0;
    plansRead.length = 0;
    vi.stubGlobal(
      "fetch",
      vi.fn(async (_url: string, init: RequestInit) => {
        const body = JSON.parse(String(init.body)) as { query: string; variables: { id: string } };
        // One read is two requests: the run's plan and its state.
        if (/query LiveRun\b/.test(body.query)) runsRead.push(body.variables.id);
        else if (/query RunPlan\b/.test(body.query)) plansRead.push(body.variables.id);
        return new Response(JSON.stringify({ data: { workflowRun: { id: body.variables.id }, events: { nextCursor: null } } }), { status: 200 });
      }),
    );
    sessionStorage.setItem("calcgraph.session", JSON.stringify({ accessToken: "t", expiresAt: Date.now() + 3_600_000, username: "alice", roles: ["user"] }));
  });
  afterEach(() => {
    const dropped = firstRead("drop any start-up read");
    dropped.plan.catch(() => undefined);
    dropped.state.catch(() => undefined);
    vi.unstubAllGlobals();
    vi.restoreAllMocks();
    sessionStorage.clear();
  });

  it("reads the run of a run page's address once, and the page takes that read", async () => {
    readRunEarly("/ui/runs/r1");
    expect(plansRead).toEqual(["r1"]);
    expect(runsRead).toEqual(["r1"]);
    const answer = firstRead("r1");
    expect((await answer.plan).workflowRun.id).toBe("r1");
    expect((await answer.state).workflowRun.id).toBe("r1");
    expect(plansRead).toEqual(["r1"]);
    expect(runsRead).toEqual(["r1"]);
    // Used once: the next page of the same run reads again.
    await firstRead("r1").state;
    expect(plansRead).toEqual(["r1", "r1"]);
    expect(runsRead).toEqual(["r1", "r1"]);
  });

  it("is not shown for another run, and is dropped once another run's page opened", async () => {
    readRunEarly("/ui/runs/r1");
    expect((await firstRead("r2").state).workflowRun.id).toBe("r2");
    expect((await firstRead("r1").plan).workflowRun.id).toBe("r1");
    expect(runsRead).toEqual(["r1", "r2", "r1"]);
    expect(plansRead).toEqual(["r1", "r2", "r1"]);
  });

  it("goes stale: a page opened later reads again", async () => {
    readRunEarly("/ui/runs/r1");
    const now = performance.now();
    vi.spyOn(performance, "now").mockReturnValue(now + 11_000);
    await firstRead("r1").state;
    expect(runsRead).toEqual(["r1", "r1"]);
  });

  it("reads nothing at other addresses or without a session", () => {
    for (const path of ["/ui/runs", "/ui/runs/", "/ui/runs/r1/x", "/ui/workflows/r1", "/runs/r1"]) readRunEarly(path);
    sessionStorage.clear();
    readRunEarly("/ui/runs/r1");
    expect(runsRead).toEqual([]);
    expect(plansRead).toEqual([]);
  });
});
