// Automatic layout of a workflow graph with dagre (left to right, ranks by dependency), as
// @xyflow/react's layouting guide does it: dagre places the boxes, React Flow draws them. Only
// dagre here: the run page lays out in a worker (lib/layoutWorker) that loads this module alone.
import dagre, { type graphlib } from "@dagrejs/dagre";
import type { Box, Link } from "./boxes";

/** Above this many boxes dagre ranks by longest path and keeps its first order (`layout`). */
export const FAST_LAYOUT_BOXES = 300;

/** The gap between two boxes of a rank, and the margin around the graph. */
const NODESEP = 24;
const MARGIN = 10;

/** Top-left positions of the boxes (React Flow's origin), keyed by id, as dagre places them.
 * Past FAST_LAYOUT_BOXES boxes (`fast`) dagre ranks by longest path (`ranker: "longest-path"`,
 * not its network simplex) and keeps the first order it finds (`firstOrder`: no sweeps to
 * reduce crossings). For a 1,000-node run in Node that took 170-220 ms with dagre's own
 * `disableOptimalOrderHeuristic` against 350-415 ms with its defaults (2026-11-29, load 0.5);
 * `firstOrder` saves the sweeps' graphs that dagre builds before it reads that option. Links are laid out once per pair of boxes
 * (several bindings between the same two boxes are one path); a link of a box to itself or to a
 * box not laid out is left out. */
export function layout(
  boxes: readonly Box[],
  links: readonly Link[],
  ranksep = 90,
  fast = boxes.length > FAST_LAYOUT_BOXES,
): Map<string, { x: number; y: number }> {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: NODESEP, ranksep, marginx: MARGIN, marginy: MARGIN, ...(fast ? { ranker: "longest-path" } : {}) });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set<string>();
  for (const b of boxes) {
    g.setNode(b.id, { width: b.width, height: b.height });
    ids.add(b.id);
  }
  for (const l of links) if (ids.has(l.source) && ids.has(l.target) && l.source !== l.target) g.setEdge(l.source, l.target);
  dagre.layout(g, fast ? { customOrder: firstOrder } : undefined);
  const out = new Map<string, { x: number; y: number }>();
  for (const b of boxes) {
    const n = g.node(b.id) as { x: number; y: number } | undefined;
    out.set(b.id, n ? { x: n.x - b.width / 2, y: n.y - b.height / 2 } : { x: 0, y: 0 });
  }
  return out;
}

type Ranked = { rank: number; order?: number };

/** dagre's first order (its `initOrder`, then `assignOrder`), given as its `customOrder`: depth
 * first from the boxes of the lowest ranks (successors in dagre's order), each box taking the
 * next place of its rank when first reached. The same order as dagre's with
 * `disableOptimalOrderHeuristic`, without the layer graphs its `order` builds for the sweeps
 * first (a third of a 1,000-node layout). */
export function firstOrder(g: graphlib.Graph): void {
  const rankOf = (v: string) => (g.node(v) as unknown as Ranked).rank;
  const simple = g.nodes().filter((v) => (g.children(v) ?? []).length === 0);
  const places: number[] = [];
  const seen = new Set<string>();
  for (const root of [...simple].sort((a, b) => rankOf(a) - rankOf(b))) {
    const stack = [root];
    while (stack.length > 0) {
      const v = stack.pop() as string;
      if (seen.has(v)) continue;
      seen.add(v);
      const node = g.node(v) as unknown as Ranked;
      node.order = places[node.rank] ?? 0;
      places[node.rank] = node.order + 1;
      const next = g.successors(v) ?? [];
      for (let i = next.length - 1; i >= 0; i--) if (!seen.has(next[i] as string)) stack.push(next[i] as string);
    }
  }
}
