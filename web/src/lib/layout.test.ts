import dagre from "@dagrejs/dagre";
import { describe, expect, it } from "vitest";
import { boxHeight, type Box, type Link } from "./boxes";
import { layout } from "./layout";
import { fittedViewport } from "./viewport";

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

/** No two boxes of a column overlap: sorted by row, neighbours are a box (and dagre's 24 px
 * gap) apart, to a float's last bits. */
function expectNoOverlap(boxes: readonly Box[], placed: Map<string, { x: number; y: number }>): void {
  const byColumn = new Map<number, Box[]>();
  for (const b of boxes) {
    const x = placed.get(b.id)?.x ?? NaN;
    byColumn.set(x, [...(byColumn.get(x) ?? []), b]);
  }
  for (const column of byColumn.values()) {
    const y = (b: Box) => placed.get(b.id)?.y ?? NaN;
    column.sort((p, q) => y(p) - y(q));
    column.slice(1).forEach((b, i) => {
      const above = column[i] as Box;
      expect(y(b) - y(above), `${above.id} above ${b.id}`).toBeGreaterThanOrEqual(above.height + 24 - 1e-9);
    });
  }
}

describe("layout", () => {
  it("fast: dagre itself, with longest-path ranks and its first order; each link going right, no overlap in a rank", () => {
    const { boxes, links } = graph();
    const g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "LR", nodesep: 24, ranksep: 50, marginx: 10, marginy: 10, ranker: "longest-path" });
    g.setDefaultEdgeLabel(() => ({}));
    for (const b of boxes) g.setNode(b.id, { width: b.width, height: b.height });
    for (const l of links) g.setEdge(l.source, l.target);
    dagre.layout(g, { disableOptimalOrderHeuristic: true });
    const fast = layout(boxes, links, 50, true);
    const at = (id: string) => fast.get(id) ?? { x: NaN, y: NaN };
    for (const b of boxes) {
      const n = g.node(b.id) as { x: number; y: number };
      expect(at(b.id), b.id).toEqual({ x: n.x - b.width / 2, y: n.y - b.height / 2 });
    }
    for (const l of links) expect(at(l.target).x - at(l.source).x, `${l.source}->${l.target}`).toBeGreaterThanOrEqual(180 + 50);
    expectNoOverlap(boxes, fast);
  });

  it("fast and full alike: the same ranks for a graph whose longest paths are its only paths", () => {
    const boxes: Box[] = ["a", "b", "c", "d"].map((id) => ({ id, width: 180, height: 58 }));
    const links: Link[] = [{ source: "a", target: "b" }, { source: "b", target: "c" }, { source: "c", target: "d" }];
    const fast = layout(boxes, links, 50, true);
    const full = layout(boxes, links, 50, false);
    for (const b of boxes) expect(fast.get(b.id)?.x, b.id).toBe(full.get(b.id)?.x);
  });

  it("a cycle, a self-link, a link to an unknown box and repeated links are laid out all the same, every box placed once and apart", () => {
    const boxes: Box[] = ["a", "b", "c", "d", "e"].map((id, i) => ({ id, width: 180, height: 58 + 10 * i }));
    const links: Link[] = [
      { source: "a", target: "b" },
      { source: "a", target: "b" },
      { source: "b", target: "c" },
      { source: "c", target: "a" },
      { source: "c", target: "d" },
      { source: "d", target: "d" },
      { source: "zz", target: "e" },
    ];
    for (const fast of [true, false]) {
      const placed = layout(boxes, links, 50, fast);
      expect([...placed.keys()].sort()).toEqual(["a", "b", "c", "d", "e"]);
      for (const p of placed.values()) expect(Number.isFinite(p.x) && Number.isFinite(p.y)).toBe(true);
      expect((placed.get("d")?.x ?? 0) - (placed.get("c")?.x ?? 0)).toBeGreaterThanOrEqual(230);
      expectNoOverlap(boxes, placed);
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

  it("a 1,000-node run (fast by default): left to right, no two boxes overlap, and fitted whole in the pane", () => {
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
    // Each chain on one row.
    for (let c = 0; c < 9; c++) expect(new Set(Array.from({ length: 111 }, (_, i) => at(`c${c}_${i}`).y)).size).toBe(1);
    expectNoOverlap(boxes, placed);
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
