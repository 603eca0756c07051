// The layout of a large graph off the main thread: lib/layout.ts's dagre layout run in a Web
// Worker (layout.worker.ts), started before the graph is known so its script loads while the
// graph is read. Where no worker can run (a test's jsdom, a worker that fails to start), the same
// layout runs on the main thread: the positions are the same either way.
import { layout, type Box, type Link } from "./layout";

/** One layout asked of the worker. */
export interface LayoutWork {
  /** Told back with the answer: which layout it is. */
  seq?: number;
  boxes: Box[];
  links: Link[];
  ranksep: number;
}

/** The worker's answer: the work's `seq` and [box id, top-left position] of every box. */
export interface Positions {
  seq: number | undefined;
  at: [string, { x: number; y: number }][];
}

export interface Layouter {
  /** The positions of the boxes, as `layout(boxes, links, ranksep)` gives them. */
  layout(work: LayoutWork): Promise<Map<string, { x: number; y: number }>>;
  /** Ends the worker (a layout still under way is never answered). */
  stop(): void;
}

async function onMainThread(work: LayoutWork): Promise<Map<string, { x: number; y: number }>> {
  return layout(work.boxes, work.links, work.ranksep);
}

/** A worker ready for layouts, one at a time: a layout asked before the previous one is
 * answered replaces it (the previous one is never answered). */
export function startLayouter(): Layouter {
  let worker: Worker | null = null;
  try {
    worker = typeof Worker === "undefined" ? null : new Worker(new URL("./layout.worker.ts", import.meta.url), { type: "module" });
  } catch {
    worker = null;
  }
  let pending: { resolve: (p: Map<string, { x: number; y: number }>) => void; work: LayoutWork } | null = null;
  let seq = 0;
  const fallBack = () => {
    worker?.terminate();
    worker = null;
    const left = pending;
    pending = null;
    if (left) void onMainThread(left.work).then(left.resolve);
  };
  if (worker) {
    worker.onmessage = (e: MessageEvent<Positions>) => {
      const done = pending;
      if (!done || done.work.seq !== e.data.seq) return; // a layout since replaced
      pending = null;
      done.resolve(new Map(e.data.at));
    };
    worker.onerror = (e) => {
      e.preventDefault();
      fallBack();
    };
  }
  return {
    layout(work) {
      if (!worker) return onMainThread(work);
      return new Promise((resolve) => {
        const numbered = { ...work, seq: ++seq };
        pending = { resolve, work: numbered };
        worker?.postMessage(numbered);
      });
    },
    stop() {
      worker?.terminate();
      worker = null;
      pending = null;
    },
  };
}
