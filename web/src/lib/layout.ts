// Automatic layout of a workflow graph with dagre (left to right, ranks by dependency), as
// @xyflow/react's layouting guide does it: dagre places the boxes, React Flow draws them.
import dagre from "@dagrejs/dagre";

export interface Box {
  id: string;
  width: number;
  height: number;
}

export interface Link {
  source: string;
  target: string;
}

/** Top-left positions of the boxes (React Flow's origin), keyed by id. */
export function layout(boxes: readonly Box[], links: readonly Link[], ranksep = 90): Map<string, { x: number; y: number }> {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "LR", nodesep: 24, ranksep, marginx: 10, marginy: 10 });
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

/** The height a node box takes for its ports (FlowNode's CSS: 22 px a port row). */
export function boxHeight(portRows: number, compact = false): number {
  return compact ? 44 : 58 + 22 * portRows;
}
