import dagre from "@dagrejs/dagre";
import { describe, expect, it } from "vitest";
import { layout, type Box, type Link } from "./layout";

/** A graph with fan-out, fan-in, long edges and several sources: 3 inputs, 60 nodes in layers
 * that read two nodes of the layer before and, now and then, an input directly. */
function graph(): { boxes: Box[]; links: Link[] } {
  const boxes: Box[] = ["a", "b", "c"].map((id) => ({ id, width: 180, height: 58 }));
  const links: Link[] = [];
  for (let layer = 0; layer < 6; layer++) {
    for (let i = 0; i < 10; i++) {
      const id = `n${layer}_${i}`;
      boxes.push({ id, width: 180, height: 58 + 22 * (i % 3) });
      const before = layer === 0 ? ["a", "b", "c"] : Array.from({ length: 10 }, (_, j) => `n${layer - 1}_${j}`);
      links.push({ source: before[(i * 7) % before.length] ?? "a", target: id }, { source: before[(i * 3 + 1) % before.length] ?? "a", target: id });
      if (i % 4 === 0) links.push({ source: "c", target: id });
    }
  }
  return { boxes, links };
}

describe("layout", () => {
  it("fast: dagre's first order through customOrder, the same places as disableOptimalOrderHeuristic", () => {
    const { boxes, links } = graph();
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "LR", nodesep: 24, ranksep: 50, marginx: 10, marginy: 10, ranker: "longest-path" });
    g.setDefaultEdgeLabel(() => ({}));
    for (const b of boxes) g.setNode(b.id, { width: b.width, height: b.height });
    links.forEach((l, i) => g.setEdge(l.source, l.target, {}, String(i)));
    dagre.layout(g, { disableOptimalOrderHeuristic: true });
    const fast = layout(boxes, links, 50, true);
    for (const b of boxes) {
      const n = g.node(b.id) as { x: number; y: number };
      expect(fast.get(b.id), b.id).toEqual({ x: n.x - b.width / 2, y: n.y - b.height / 2 });
    }
  });

  it("a 301-box fan-out (fast by default): one rank, no two boxes overlap", () => {
    const boxes: Box[] = Array.from({ length: 301 }, (_, i) => ({ id: `k${i}`, width: 180, height: 58 }));
    const links: Link[] = boxes.slice(1).map((b) => ({ source: "k0", target: b.id }));
    const placed = layout(boxes, links, 50);
    const ys = boxes.slice(1).map((b) => placed.get(b.id)?.y ?? NaN).sort((p, q) => p - q);
    ys.slice(1).forEach((y, i) => expect(y - (ys[i] ?? NaN)).toBeGreaterThanOrEqual(58));
    expect(new Set(boxes.slice(1).map((b) => placed.get(b.id)?.x)).size).toBe(1);
  });
});
