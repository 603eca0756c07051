import { describe as suite, expect, it } from "vitest";
import { describe, merge, unread, type Notice } from "./notifications";

const run = (id: string, type: string, time: string, data: Record<string, unknown> = {}): Notice => ({
  id,
  type,
  subject: "r-123456789",
  time,
  data: { run_id: "r-123456789", workflow: "beam", ...data },
});

suite("describe", () => {
  it("says what happened to a run and links to it", () => {
    const d = describe(run("1", "calcgraph.run.failed", "2026-11-27T18:00:00Z", { first_failed_node_key: "beam" }));
    expect(d).toEqual({ text: "Run r-123456 of beam failed at beam", href: "/runs/r-123456789", failed: true });
    expect(describe(run("2", "calcgraph.run.completed", "2026-11-27T18:00:00Z")).text).toBe("Run r-123456 of beam completed");
  });
  it("links a build to its function and says why it was refused", () => {
    const e: Notice = { id: "3", type: "calcgraph.build.refused", subject: "f1", time: "2026-11-27T18:00:00Z", data: { function: "f1", reason: "critical CVE" } };
    expect(describe(e)).toEqual({ text: "Build refused: critical CVE", href: "/functions/f1", failed: true });
  });
  it("names a deployment's package and version", () => {
    const e: Notice = { id: "4", type: "calcgraph.deployment.rolled_back", subject: "p1", time: "2026-11-27T18:00:00Z", data: { package: "demo", version: "1.0.0" } };
    expect(describe(e)).toMatchObject({ text: "demo 1.0.0 rolled back", href: "/packages/p1" });
  });
});

suite("merge and unread", () => {
  const a = run("a", "calcgraph.run.completed", "2026-11-27T18:00:01Z");
  const b = run("b", "calcgraph.run.failed", "2026-11-27T18:00:02Z");
  const c = run("c", "calcgraph.run.completed", "2026-11-27T18:00:03Z");
  it("keeps the newest first, once each, at most `keep`", () => {
    expect(merge([b, a], [c, b]).map((e) => e.id)).toEqual(["c", "b", "a"]);
    expect(merge([b, a], [c], 2).map((e) => e.id)).toEqual(["c", "b"]);
  });
  it("counts what is newer than the last seen", () => {
    expect(unread([c, b, a], null)).toBe(3);
    expect(unread([c, b, a], b.time)).toBe(1);
    expect(unread([c, b, a], c.time)).toBe(0);
  });
});
