// A run's layout, started as soon as its plan is read (lib/liveRun), in a worker
// (lib/layoutWorker): dagre took 94-160 ms for a 1,000-node run in Node and about 320 ms in the
// web bench's Chromium worker (2026-11-29, load 1-3), time the page's thread spends loading the
// app and drawing the rest of the run. A run's plan never changes: it is laid
// out once, and the page takes the layout already under way. Where no worker can run (a test's
// DOM, a worker that fails to load), the layout runs on the page's thread all the same.
import type { Box } from "./boxes";
import { boxHeight } from "./boxes";
import type { RunPlan } from "./liveRun";
import type { LayoutAnswer, LayoutRequest } from "./layoutWorker";
import { planLinks, planNodes, type PlanLink } from "./runGraph";

/** A run node's box: no ports drawn (the run page's edges join the boxes' sides). */
export const RUN_NODE = { width: 180, height: boxHeight(0) };
/** No edge labels on the run page: ranks close enough to read at 100 %. */
const RANK_GAP = 50;

export type Position = { x: number; y: number };

let worker: Worker | null | undefined;
let sent = 0;
/** The layouts sent to the worker and not yet answered: each is laid out on the page instead
 * (`here`) if the worker fails. */
const waiting = new Map<number, { boxes: Box[]; resolve: (placed: Map<string, Position>) => void; here: () => void }>();

/** On the page's thread, dagre loaded when first needed (not with the run's first read). */
async function layoutHere(request: LayoutRequest): Promise<Map<string, Position>> {
  const { layout } = await import("./layout");
  return layout(request.boxes, request.links, request.ranksep);
}

function layoutWorker(): Worker | null {
  if (worker !== undefined) return worker;
  try {
    worker = typeof Worker === "undefined" ? null : new Worker(new URL("./layoutWorker.ts", import.meta.url), { type: "module" });
  } catch {
    worker = null;
  }
  worker?.addEventListener("message", (event: MessageEvent<LayoutAnswer>) => {
    const job = waiting.get(event.data.key);
    if (!job) return;
    waiting.delete(event.data.key);
    const { corners } = event.data;
    job.resolve(new Map(job.boxes.map((b, i) => [b.id, { x: corners[2 * i] ?? 0, y: corners[2 * i + 1] ?? 0 }])));
  });
  // A worker that cannot load or fails: what it was given is laid out here, and so is the rest.
  worker?.addEventListener("error", () => {
    worker = null;
    for (const job of waiting.values()) job.here();
    waiting.clear();
  });
  return worker;
}

/** The worker started (its script and dagre loading) before a plan is there to lay out. */
export function warmLayout(): void {
  layoutWorker();
}

/** Where a layout was computed: "worker", or "page" when no worker could run it. */
type Where = "worker" | "page";

function place(boxes: Box[], links: readonly PlanLink[]): Promise<[Map<string, Position>, Where]> {
  const request: LayoutRequest = { key: ++sent, boxes, links: links.map((l) => ({ source: l.source, target: l.target })), ranksep: RANK_GAP };
  const w = layoutWorker();
  const here = () => layoutHere(request).then((placed): [Map<string, Position>, Where] => [placed, "page"]);
  if (w === null) return here();
  return new Promise((resolve, reject) => {
    waiting.set(request.key, { boxes, resolve: (placed) => resolve([placed, "worker"]), here: () => here().then(resolve, reject) });
    w.postMessage(request);
  });
}

/** The last few runs' layouts, by run id (a run's plan never changes). */
const laidOut = new Map<string, Promise<Map<string, Position>>>();
const KEPT = 4;

/** The top-left corner of each of the run's boxes (lib/runGraph's nodes), keyed by node key. */
export function runLayout(plan: RunPlan): Promise<Map<string, Position>> {
  const known = laidOut.get(plan.id);
  if (known) return known;
  const start = performance.now();
  const nodes = planNodes(plan);
  const placed = place(nodes.map((n) => ({ id: n.node_key, ...RUN_NODE })), planLinks(nodes)).then(([positions, where]) => {
    // From the plan's arrival to its layout's, and where it ran (the bench and the browser
    // tests read it).
    performance.measure("calcgraph:layout", { start, detail: { where, boxes: nodes.length } });
    return positions;
  });
  laidOut.set(plan.id, placed);
  for (const id of laidOut.keys()) if (laidOut.size > KEPT) laidOut.delete(id);
  // A failed layout is tried again by the next page that asks.
  placed.catch(() => laidOut.delete(plan.id));
  return placed;
}
