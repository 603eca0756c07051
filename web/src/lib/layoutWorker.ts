// The run page's layout off the page's thread: dagre (lib/layout) in a worker, started with the
// run's first read (lib/runLayout), so a 1,000-node plan is laid out while the app loads and the
// page draws the rest of the run, not between the plan's arrival and the graph's first draw.
import type { Box, Link } from "./boxes";
import { layout } from "./layout";

export interface LayoutRequest {
  key: number;
  boxes: Box[];
  links: Link[];
  ranksep: number;
}

/** The boxes' top-left corners in the request's order, x then y for each. */
export interface LayoutAnswer {
  key: number;
  corners: Float64Array;
}

self.onmessage = (event: MessageEvent<LayoutRequest>) => {
  const { key, boxes, links, ranksep } = event.data;
  const placed = layout(boxes, links, ranksep);
  const corners = new Float64Array(boxes.length * 2);
  boxes.forEach((b, i) => {
    const at = placed.get(b.id) ?? { x: 0, y: 0 };
    corners[2 * i] = at.x;
    corners[2 * i + 1] = at.y;
  });
  const answer: LayoutAnswer = { key, corners };
  self.postMessage(answer, { transfer: [corners.buffer] });
};
