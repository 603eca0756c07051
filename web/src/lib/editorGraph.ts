// The editor's graph rules of drawing (not of validity: the server decides that): the ports of
// each node, the edges of the document, removing edges and nodes, the validation report by node.
import type { Edge } from "@xyflow/react";
import { ApiError } from "./api";
import { globMatch, sourceOf, type GraphDocument, type GraphNode } from "./graph";
import { formatTypeExpr, typeExprOf } from "./typeexpr";

export type Port = { name: string; type: string };
/** A function reference's resolved ports, and its deprecation note when it is deprecated. */
export type Schemas = Record<string, { inputs: Port[]; outputs: Port[]; deprecated?: string | null } | { error: string }>;

/** Report categories that are notices, not problems: they leave the graph valid (contract 11's
 * `deprecated_functions`), so a node is not marked invalid for them; the editor shows a
 * deprecated node from its resolved version instead. */
const NOTICES = new Set(["deprecated_functions"]);

function typeText(value: unknown): string {
  try {
    return formatTypeExpr(typeExprOf(value));
  } catch {
    return JSON.stringify(value);
  }
}

/** The ports of every node: function ports from their resolved versions, extract ports from the
 * outputs their pattern matches. */
export function nodePorts(node: GraphNode, graph: GraphDocument, schemas: Schemas): { inPorts: Port[]; outPorts: Port[] } {
  if (node.kind === "input") return { inPorts: [], outPorts: [{ name: "value", type: typeText(node.input_spec?.type_expr) }] };
  if (node.kind === "function") {
    const s = schemas[node.function ?? ""];
    return s && "inputs" in s ? { inPorts: s.inputs, outPorts: s.outputs } : { inPorts: [], outPorts: [] };
  }
  const from = graph.nodes.find((n) => n.node_key === node.from_node_key);
  const upstream = from ? nodePorts(from, graph, schemas).outPorts : [];
  const matched = upstream.filter((p) => globMatch(node.pattern ?? "*", p.name));
  const outPorts = node.mode === "filter" ? matched : [{ name: "value", type: matched[0]?.type ?? "Numeric" }];
  return { inPorts: [{ name: "bundle", type: "outputs" }], outPorts };
}

export function problemsByNode(report: unknown): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (!report || typeof report !== "object") return out;
  for (const [category, entries] of Object.entries(report as Record<string, unknown>)) {
    if (!Array.isArray(entries) || NOTICES.has(category)) continue;
    for (const e of entries as { node_key?: string | null; port?: string; reason?: string }[]) {
      const key = e.node_key ?? "(document)";
      const list = out.get(key) ?? [];
      list.push(`${category.replace(/_/g, " ")}${e.port ? ` (${e.port})` : ""}: ${e.reason ?? ""}`);
      out.set(key, list);
    }
  }
  return out;
}

export function edgeId(source: string, fromPort: string, target: string, port: string): string {
  return `${source}.${fromPort}->${target}.${port}`;
}

export function graphEdges(graph: GraphDocument): Edge[] {
  return graph.nodes.flatMap((n) => {
    const list: Edge[] = Object.entries(n.input_bindings ?? {}).map(([port, b]) => ({
      id: edgeId(sourceOf(b), b.from_port, n.node_key, port),
      source: sourceOf(b),
      sourceHandle: b.from_port,
      target: n.node_key,
      targetHandle: port,
      ariaLabel: `Edge ${sourceOf(b)}.${b.from_port} to ${n.node_key}.${port}`,
    }));
    if (n.kind === "extract" && n.from_node_key) {
      list.push({ id: `${n.from_node_key}->${n.node_key}.bundle`, source: n.from_node_key, target: n.node_key, targetHandle: "bundle", animated: true });
    }
    return list;
  });
}

/** The graph without the edges named by id (and without the nodes named by key). */
export function without(graph: GraphDocument, edgeIds: ReadonlySet<string>, nodeKeys: ReadonlySet<string>): GraphDocument {
  return {
    ...graph,
    nodes: graph.nodes
      .filter((n) => !nodeKeys.has(n.node_key))
      .map((n) => {
        const bindings = n.input_bindings
          ? Object.fromEntries(Object.entries(n.input_bindings).filter(([port, b]) => !edgeIds.has(edgeId(sourceOf(b), b.from_port, n.node_key, port)) && !nodeKeys.has(sourceOf(b))))
          : undefined;
        const bundle = n.kind === "extract" && n.from_node_key && (edgeIds.has(`${n.from_node_key}->${n.node_key}.bundle`) || nodeKeys.has(n.from_node_key));
        const next: GraphNode = { ...n, ...(bindings ? { input_bindings: bindings } : {}) };
        if (bundle) delete next.from_node_key;
        return next;
      }),
  };
}

export function cyclesOf(error: unknown): string[] {
  if (!(error instanceof ApiError)) return [];
  const cycles = (error.extensions.report as { cycles?: { reason?: string }[] } | undefined)?.cycles ?? [];
  return cycles.map((c) => c.reason ?? "a cycle");
}

