// The workflow graph document (contract 5) as the editor and run page read it.
export interface Binding {
  source: "input_node" | "edge" | "chain";
  input_key?: string;
  from_node_key?: string;
  from_port: string;
}

export interface GraphNode {
  node_key: string;
  kind: "input" | "function" | "extract";
  input_spec?: { type_expr: unknown };
  function?: string;
  input_bindings?: Record<string, Binding>;
  mode?: "pick" | "filter";
  from_node_key?: string;
  pattern?: string;
  [other: string]: unknown;
}

export interface GraphDocument {
  nodes: GraphNode[];
}

export function asGraph(value: unknown): GraphDocument {
  const nodes = (value as { nodes?: unknown } | null)?.nodes;
  return { nodes: Array.isArray(nodes) ? (nodes as GraphNode[]) : [] };
}

export function sourceOf(binding: Binding): string {
  return (binding.source === "input_node" ? binding.input_key : binding.from_node_key) ?? "";
}

/** Column of each node: its longest distance from a node without dependencies. */
export function levels(nodes: readonly GraphNode[]): Map<string, number> {
  const deps = new Map<string, string[]>();
  for (const n of nodes) {
    const d = Object.values(n.input_bindings ?? {}).map(sourceOf);
    if (n.kind === "extract" && n.from_node_key) d.push(n.from_node_key);
    deps.set(n.node_key, d);
  }
  const level = new Map<string, number>();
  const visit = (key: string, seen: Set<string>): number => {
    const known = level.get(key);
    if (known !== undefined) return known;
    if (seen.has(key)) return 0; // a cycle: the validation report names it
    seen.add(key);
    const parents = deps.get(key) ?? [];
    const value = parents.length === 0 ? 0 : 1 + Math.max(...parents.map((p) => visit(p, seen)));
    level.set(key, value);
    return value;
  };
  for (const n of nodes) visit(n.node_key, new Set());
  return level;
}

/** Glob of extract nodes (`*`, `?`) on keys joined with `/`. */
export function globMatch(pattern: string, key: string): boolean {
  const re = new RegExp(
    "^" + pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".") + "$",
  );
  return re.test(key);
}
