import { describe, expect, it } from "vitest";
import type { RunPlan } from "./liveRun";
import { runLayout, RUN_NODE } from "./runLayout";
import { planNodes } from "./runGraph";

function plan(id: string): RunPlan {
  const nodes = [
    { node_key: "b_10", kind: "function", function: "p/f", input_bindings: { x: { source: "edge", from_node_key: "b_2", from_port: "y" } } },
    { node_key: "b_2", kind: "function", function: "p/f", input_bindings: { x: { source: "input_node", input_key: "x", from_port: "value" } } },
    { node_key: "pick", kind: "extract", mode: "pick", pattern: "y", from_node_key: "b_10" },
  ];
  return { id, planGraph: { nodes, input_nodes: ["x"] }, inputs: { x: 1, extra: 2 }, startedAt: "", workflowId: "w", rerunOf: null, workflowVersion: null, workflow: null, functionVersions: [] };
}

describe("runLayout", () => {
  it("places every box of the plan (its inputs too) left to right along its links, where no worker can run", async () => {
    const p = plan("r1");
    const placed = await runLayout(p);
    expect([...placed.keys()].sort()).toEqual(planNodes(p).map((n) => n.node_key).sort());
    expect([...placed.keys()].sort()).toEqual(["b_10", "b_2", "extra", "pick", "x"]);
    const x = (k: string) => placed.get(k)?.x ?? NaN;
    expect(x("b_2") - x("x")).toBeGreaterThanOrEqual(RUN_NODE.width);
    expect(x("b_10") - x("b_2")).toBeGreaterThanOrEqual(RUN_NODE.width);
    expect(x("pick") - x("b_10")).toBeGreaterThanOrEqual(RUN_NODE.width);
    const measured = performance.getEntriesByName("calcgraph:layout", "measure").at(-1) as PerformanceMeasure | undefined;
    expect(measured?.detail).toEqual({ where: "page", boxes: 5 });
  });

  it("lays a run out once: the page takes the layout its first read started", () => {
    const first = runLayout(plan("r2"));
    expect(runLayout(plan("r2"))).toBe(first);
    expect(runLayout(plan("r3"))).not.toBe(first);
  });
});
