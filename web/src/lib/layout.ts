// Automatic layout of a workflow graph with dagre (left to right, ranks by dependency), as
// @xyflow/react's layouting guide does it: dagre places the boxes, React Flow draws them.
import dagre from "@dagrejs/dagre";
import { getNodesBounds, getViewportForBounds, type Node, type Viewport } from "@xyflow/react";

export interface Box {
  id: string;
  width: number;
  height: number;
}

export interface Link {
  source: string;
  target: string;
}

/** Above this many boxes a layout takes dagre's cheaper phases (see `layout`'s `fast`). */
export const FAST_LAYOUT_BOXES = 300;

/** Top-left positions of the boxes (React Flow's origin), keyed by id. `fast` (by default past
 * FAST_LAYOUT_BOXES boxes) ranks by longest path instead of network simplex and keeps dagre's
 * first (depth-first) order instead of its crossing-reduction sweeps: on a 1,000-node run those
 * two phases were two thirds of the layout's time, and at the zoom that shows such a graph whole
 * the crossings they save are not readable anyway. */
export function layout(
  boxes: readonly Box[],
  links: readonly Link[],
  ranksep = 90,
  fast = boxes.length > FAST_LAYOUT_BOXES,
): Map<string, { x: number; y: number }> {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "LR", nodesep: 24, ranksep, marginx: 10, marginy: 10, ...(fast ? { ranker: "longest-path" } : {}) });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set<string>();
  for (const b of boxes) {
    g.setNode(b.id, { width: b.width, height: b.height });
    ids.add(b.id);
  }
  links.forEach((l, i) => {
    if (ids.has(l.source) && ids.has(l.target) && l.source !== l.target) g.setEdge(l.source, l.target, {}, String(i));
  });
  dagre.layout(g, fast ? { customOrder: firstOrder } : undefined);
  const out = new Map<string, { x: number; y: number }>();
  for (const b of boxes) {
    const n = g.node(b.id) as { x: number; y: number } | undefined;
    out.set(b.id, n ? { x: n.x - b.width / 2, y: n.y - b.height / 2 } : { x: 0, y: 0 });
  }
  return out;
}

/** dagre's first order of each rank (its `initOrder`: depth-first from the nodes of the lowest
 * ranks), given through its `customOrder` hook: `disableOptimalOrderHeuristic` keeps the same
 * order but first builds the layer graphs of the sweeps it then skips (a sixth of the layout). */
function firstOrder(graph: InstanceType<typeof dagre.graphlib.Graph>): void {
  const seen = new Set<string>();
  const next = new Map<number, number>();
  const rank = (v: string) => (graph.node(v) as { rank: number }).rank;
  const simple = graph.nodes().filter((v) => (graph.children(v) ?? []).length === 0);
  simple.sort((a, b) => rank(a) - rank(b));
  const visit = (v: string): void => {
    if (seen.has(v)) return;
    seen.add(v);
    const node = graph.node(v) as { rank: number; order?: number };
    const order = next.get(node.rank) ?? 0;
    node.order = order;
    next.set(node.rank, order + 1);
    for (const w of graph.successors(v) ?? []) visit(w);
  };
  simple.forEach(visit);
}

/** The height a node box takes for its ports (FlowNode's CSS: 22 px a port row). */
export function boxHeight(portRows: number, compact = false): number {
  return compact ? 44 : 58 + 22 * portRows;
}

/** What fit-to-view shows of `nodes` (laid out, with their sizes) in a pane of this size: React
 * Flow's own computation (`getViewportForBounds`, as its fitView), for a graph drawn fitted from
 * its first commit. */
export function fittedViewport(
  nodes: readonly Node[],
  pane: { width: number; height: number },
  fit: { padding: number; minZoom: number; maxZoom: number },
): Viewport {
  return getViewportForBounds(getNodesBounds([...nodes]), pane.width, pane.height, fit.minZoom, fit.maxZoom, fit.padding);
}
