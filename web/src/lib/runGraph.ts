// A run's plan as the run page draws it: its boxes (the plan's nodes and its input nodes, in
// natural order) and its links (each binding, from the node read to the node reading it). Pure:
// the page and the layout started with the run's first read (lib/runLayout) derive the same.
import { sourceOf, type GraphNode } from "./graph";
import type { RunPlan } from "./liveRun";
import { naturalSort } from "./sort";

export interface PlanLink {
  source: string;
  target: string;
  label: string;
}

/** The plan's nodes (`planGraph`), its input nodes named by the plan, the run's inputs and the
 * bindings. */
export function planNodes(run: Pick<RunPlan, "planGraph" | "inputs">): GraphNode[] {
  const drawn = run.planGraph as { nodes?: GraphNode[]; input_nodes?: string[] } | null;
  const plan = drawn?.nodes ?? [];
  const others = plan.filter((n) => n.kind !== "input");
  const inputs = new Map(plan.filter((n) => n.kind === "input").map((n) => [n.node_key, n]));
  for (const k of [...(drawn?.input_nodes ?? []), ...Object.keys((run.inputs as Record<string, unknown>) ?? {})]) if (!inputs.has(k)) inputs.set(k, { node_key: k, kind: "input" });
  for (const n of others) {
    for (const b of Object.values(n.input_bindings ?? {})) {
      if (b.source === "input_node" && b.input_key && !inputs.has(b.input_key)) inputs.set(b.input_key, { node_key: b.input_key, kind: "input" });
    }
  }
  return [...naturalSort([...inputs.values()], (n) => n.node_key), ...naturalSort(others, (n) => n.node_key)];
}

/** The plan's bindings, each a link from the node it reads to the node reading it. */
export function planLinks(nodes: readonly GraphNode[]): PlanLink[] {
  return nodes.flatMap((n) => {
    const from = Object.entries(n.input_bindings ?? {}).map(([port, b]) => ({ source: sourceOf(b), label: `${b.from_port}→${port}` }));
    if (n.kind === "extract" && n.from_node_key) from.push({ source: n.from_node_key, label: "bundle" });
    return from.map((e) => ({ source: e.source, target: n.node_key, label: e.label }));
  });
}
