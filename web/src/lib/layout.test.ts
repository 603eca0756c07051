import dagre from "@dagrejs/dagre";
import { describe, expect, it } from "vitest";
import { boxHeight, fittedViewport, layout, type Box, type Link } from "./layout";

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

  it("a 1,000-node run (fast by default): layered left to right, no two boxes overlap, and fitted whole in the pane", () => {
    // The web bench's graph: one input feeding 9 chains of 111 steps.
    const h = boxHeight(0);
    const boxes: Box[] = [{ id: "x", width: 180, height: h }];
    const links: Link[] = [];
    for (let c = 0; c < 9; c++) {
      for (let i = 0; i < 111; i++) {
        boxes.push({ id: `c${c}_${i}`, width: 180, height: h });
        links.push({ source: i === 0 ? "x" : `c${c}_${i - 1}`, target: `c${c}_${i}` });
      }
    }
    const placed = layout(boxes, links, 50);
    const at = (id: string) => placed.get(id) ?? { x: NaN, y: NaN };
    // Each edge goes right, a whole box and the rank gap further.
    for (const l of links) expect(at(l.target).x - at(l.source).x, `${l.source}->${l.target}`).toBeGreaterThanOrEqual(180 + 50);
    // One rank per step: the chains' i-th steps share a column.
    for (let i = 0; i < 111; i++) expect(new Set(Array.from({ length: 9 }, (_, c) => at(`c${c}_${i}`).x)).size).toBe(1);
    // No overlap: sorted by column then row, neighbours in a column are a box apart.
    const byColumn = new Map<number, number[]>();
    for (const b of boxes) byColumn.set(at(b.id).x, [...(byColumn.get(at(b.id).x) ?? []), at(b.id).y]);
    for (const ys of byColumn.values()) {
      ys.sort((p, q) => p - q);
      ys.slice(1).forEach((y, i) => expect(y - (ys[i] ?? NaN)).toBeGreaterThanOrEqual(h));
    }
    // Fit-to-view from the first draw: every box inside a 1,000 x 560 pane, as React Flow's fitView.
    const nodes = boxes.map((b) => ({ id: b.id, position: at(b.id), width: b.width, height: b.height, data: {} }));
    const pane = { width: 1000, height: 560 };
    const vp = fittedViewport(nodes, pane, { padding: 0.05, minZoom: 0.01, maxZoom: 1 });
    expect(vp.zoom).toBeLessThan(0.2);
    for (const n of nodes) {
      const left = n.position.x * vp.zoom + vp.x;
      const top = n.position.y * vp.zoom + vp.y;
      expect(left, n.id).toBeGreaterThanOrEqual(0);
      expect(top, n.id).toBeGreaterThanOrEqual(0);
      expect(left + n.width * vp.zoom, n.id).toBeLessThanOrEqual(pane.width);
      expect(top + n.height * vp.zoom, n.id).toBeLessThanOrEqual(pane.height);
    }
  });

  it("fittedViewport: a small graph is not blown up past 100 %", () => {
    const vp = fittedViewport([{ id: "a", position: { x: 0, y: 0 }, width: 180, height: 58, data: {} }], { width: 1000, height: 560 }, { padding: 0.05, minZoom: 0.01, maxZoom: 1 });
    expect(vp.zoom).toBe(1);
  });
});
