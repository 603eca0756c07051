import { afterEach, describe, expect, it, vi } from "vitest";
import { layout, type Box, type Link } from "./layout";
import { startLayouter, type LayoutWork, type Positions } from "./layoutOffThread";

const boxes: Box[] = ["x", "a", "b", "c"].map((id) => ({ id, width: 180, height: 58 }));
const links: Link[] = [{ source: "x", target: "a" }, { source: "a", target: "b" }, { source: "x", target: "c" }];

/** A stand-in for the browser's Worker: it keeps what it was sent; the test answers. */
class FakeWorker {
  static made: FakeWorker[] = [];
  sent: LayoutWork[] = [];
  terminated = false;
  onmessage: ((e: MessageEvent<Positions>) => void) | null = null;
  onerror: ((e: { preventDefault(): void }) => void) | null = null;
  constructor() {
    FakeWorker.made.push(this);
  }
  postMessage(work: LayoutWork) {
    this.sent.push(work);
  }
  terminate() {
    this.terminated = true;
  }
  answer(work: LayoutWork) {
    this.onmessage?.({ data: { seq: work.seq, at: [...layout(work.boxes, work.links, work.ranksep)] } } as MessageEvent<Positions>);
  }
}

afterEach(() => {
  vi.unstubAllGlobals();
  FakeWorker.made = [];
});

describe("startLayouter", () => {
  it("without workers (jsdom) lays out on the main thread: the same positions as layout", async () => {
    const layouter = startLayouter();
    expect(await layouter.layout({ boxes, links, ranksep: 50 })).toEqual(layout(boxes, links, 50));
    layouter.stop();
  });

  it("answers a layout with the worker's positions, and never with those of one it replaced", async () => {
    vi.stubGlobal("Worker", FakeWorker);
    const layouter = startLayouter();
    const worker = FakeWorker.made[0];
    if (!worker) throw new Error("no worker started");
    let firstAnswered = false;
    void layouter.layout({ boxes: boxes.slice(0, 2), links: [], ranksep: 50 }).then(() => (firstAnswered = true));
    const second = layouter.layout({ boxes, links, ranksep: 50 });
    const [first, latest] = worker.sent;
    if (!first || !latest) throw new Error("nothing sent");
    worker.answer(first); // the replaced layout's answer arrives late: ignored
    worker.answer(latest);
    expect(await second).toEqual(layout(boxes, links, 50));
    expect(firstAnswered).toBe(false);
    layouter.stop();
    expect(worker.terminated).toBe(true);
  });

  it("falls back to the main thread when the worker fails", async () => {
    vi.stubGlobal("Worker", FakeWorker);
    const layouter = startLayouter();
    const worker = FakeWorker.made[0];
    if (!worker) throw new Error("no worker started");
    const asked = layouter.layout({ boxes, links, ranksep: 50 });
    worker.onerror?.({ preventDefault() {} });
    expect(await asked).toEqual(layout(boxes, links, 50));
    expect(worker.terminated).toBe(true);
    expect(await layouter.layout({ boxes, links, ranksep: 90 })).toEqual(layout(boxes, links, 90));
  });
});
