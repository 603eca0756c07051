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

/** Above this many boxes a layout is `layered`'s, not dagre's (see `layout`). */
export const FAST_LAYOUT_BOXES = 300;

/** The gap between two boxes of a rank, and the margin around the graph (as dagre's). */
const NODESEP = 24;
const MARGIN = 10;

/** Top-left positions of the boxes (React Flow's origin), keyed by id: dagre's up to
 * FAST_LAYOUT_BOXES boxes, `layered`'s past them (`fast`). dagre's fastest phases (longest-path
 * ranks, its first order) still took 275-300 ms for a 1,000-node run, most of it in placing the
 * ~2,000 nodes it lays out (a hidden one per edge) and in building its graphs; at the zoom that
 * shows such a graph whole the straighter long edges that buys are not readable anyway. */
export function layout(
  boxes: readonly Box[],
  links: readonly Link[],
  ranksep = 90,
  fast = boxes.length > FAST_LAYOUT_BOXES,
): Map<string, { x: number; y: number }> {
  if (fast) return layered(boxes, links, ranksep);
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "LR", nodesep: NODESEP, ranksep, marginx: MARGIN, marginy: MARGIN });
  g.setDefaultEdgeLabel(() => ({}));
  const ids = new Set<string>();
  for (const b of boxes) {
    g.setNode(b.id, { width: b.width, height: b.height });
    ids.add(b.id);
  }
  links.forEach((l, i) => {
    if (ids.has(l.source) && ids.has(l.target) && l.source !== l.target) g.setEdge(l.source, l.target, {}, String(i));
  });
  dagre.layout(g);
  const out = new Map<string, { x: number; y: number }>();
  for (const b of boxes) {
    const n = g.node(b.id) as { x: number; y: number } | undefined;
    out.set(b.id, n ? { x: n.x - b.width / 2, y: n.y - b.height / 2 } : { x: 0, y: 0 });
  }
  return out;
}

/** A left-to-right layered layout in time linear in boxes and links, dagre's way in its cheapest
 * form: ranks by longest path (dagre's `longest-path` ranker: a box one rank left of its nearest
 * reader, the boxes nobody reads in the last rank), each rank ordered depth-first from the boxes
 * of the lowest ranks (dagre's first order), a rank a column as wide as its widest box. In a
 * column each box is centred on its readers' sources where it can be (a chain stays on one row)
 * and else just below the box above it, so boxes keep their order and never overlap. Links
 * closing a cycle are left out of the ranking (dagre reverses them). */
export function layered(boxes: readonly Box[], links: readonly Link[], ranksep: number): Map<string, { x: number; y: number }> {
  const index = new Map<string, number>();
  boxes.forEach((b, i) => index.set(b.id, i));
  const n = boxes.length;
  const succ: number[][] = Array.from({ length: n }, () => []);
  const pred: number[][] = Array.from({ length: n }, () => []);
  for (const l of links) {
    const s = index.get(l.source);
    const t = index.get(l.target);
    if (s === undefined || t === undefined || s === t) continue;
    succ[s]?.push(t);
    pred[t]?.push(s);
  }
  // Depth-first from every box, successors before the box (a reverse topological order); an edge
  // to a box still on the stack closes a cycle and is left out.
  const state = new Uint8Array(n); // 0 new, 1 on the stack, 2 done
  const height = new Int32Array(n); // longest path to a box nobody reads
  const back = new Set<string>();
  for (let root = 0; root < n; root++) {
    if (state[root] !== 0) continue;
    const stack: [number, number][] = [[root, 0]];
    state[root] = 1;
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as [number, number];
      const [v, next] = top;
      const out = succ[v] ?? [];
      if (next < out.length) {
        top[1] = next + 1;
        const w = out[next] as number;
        if (state[w] === 0) {
          state[w] = 1;
          stack.push([w, 0]);
        } else if (state[w] === 1) back.add(`${v} ${w}`);
        continue;
      }
      let h = 0;
      for (const w of out) if (back.size === 0 || !back.has(`${v} ${w}`)) h = Math.max(h, (height[w] ?? 0) + 1);
      height[v] = h;
      state[v] = 2;
      stack.pop();
    }
  }
  // dagre's longest-path ranks: each box as far right as its readers let it (a rank left of the
  // nearest), the boxes nobody reads in the last rank.
  let deepest = 0;
  for (let v = 0; v < n; v++) deepest = Math.max(deepest, height[v] ?? 0);
  const rank = Int32Array.from(height, (h) => deepest - h);
  // dagre's first order: depth-first from the boxes of the lowest ranks, each box appended to its
  // rank when first reached.
  const columns: number[][] = Array.from({ length: deepest + 1 }, () => []);
  const seen = new Uint8Array(n);
  const firsts = Array.from({ length: n }, (_, v) => v).sort((a, b) => (rank[a] ?? 0) - (rank[b] ?? 0) || a - b);
  for (const root of firsts) {
    if (seen[root]) continue;
    const stack = [root];
    while (stack.length > 0) {
      const v = stack.pop() as number;
      if (seen[v]) continue;
      seen[v] = 1;
      columns[rank[v] ?? 0]?.push(v);
      const out = succ[v] ?? [];
      for (let i = out.length - 1; i >= 0; i--) if (!seen[out[i] as number]) stack.push(out[i] as number);
    }
  }
  // Columns left to right; in each, boxes top to bottom, centred on their sources where there
  // is room.
  const centre = new Float64Array(n);
  const out = new Map<string, { x: number; y: number }>();
  let left = MARGIN;
  for (const column of columns) {
    let width = 0;
    let bottom = -Infinity;
    for (const v of column) {
      const box = boxes[v] as Box;
      width = Math.max(width, box.width);
      const sources = (pred[v] ?? []).filter((u) => (rank[u] ?? 0) < (rank[v] ?? 0));
      const wanted = sources.length > 0 ? sources.reduce((sum, u) => sum + (centre[u] ?? 0), 0) / sources.length - box.height / 2 : MARGIN;
      const top = bottom === -Infinity ? Math.max(wanted, MARGIN) : Math.max(wanted, bottom + NODESEP);
      centre[v] = top + box.height / 2;
      bottom = top + box.height;
      out.set(box.id, { x: left, y: top });
    }
    for (const v of column) {
      const box = boxes[v] as Box;
      const at = out.get(box.id) as { x: number; y: number };
      at.x = left + (width - box.width) / 2;
    }
    left += width + ranksep;
  }
  return out;
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
