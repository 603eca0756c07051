// dagre's layout (lib/layout.ts) in a Web Worker: the run page's 1,000-node layout (about 0.3 s)
// no longer holds the page's main thread, which draws the rest of the page meanwhile.
import { layout } from "./layout";
import type { LayoutWork, Positions } from "./layoutOffThread";

self.onmessage = (e: MessageEvent<LayoutWork>) => {
  const { seq, boxes, links, ranksep } = e.data;
  const positions: Positions = { seq, at: [...layout(boxes, links, ranksep)] };
  self.postMessage(positions);
};
