import { describe, expect, it } from "vitest";
import { POLL_MS, SAFETY_MS, Ticker, type Clock, type TickOutcome } from "./ticker";

/** A clock whose time moves only when the test says; timers fire in order. */
class FakeClock implements Clock {
  time = 1_000_000;
  private timers = new Map<number, { at: number; run: () => void }>();
  private next = 1;
  now = () => this.time;
  setTimeout = (run: () => void, ms: number) => {
    const id = this.next++;
    this.timers.set(id, { at: this.time + ms, run });
    return id;
  };
  clearTimeout = (handle: unknown) => {
    this.timers.delete(handle as number);
  };
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.time = Math.max(this.time, due[1].at);
      due[1].run();
      await flush();
    }
    this.time = end;
    await flush();
  }
}

async function flush() {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

class Overloaded extends Error {
  constructor(readonly seconds: number) {
    super("busy");
  }
}

function setup(answers: (() => TickOutcome | Error)[] = []) {
  const clock = new FakeClock();
  const ticks: number[] = [];
  const waits: (number | null)[] = [];
  const failures: unknown[] = [];
  const ticker = new Ticker(
    {
      tick: () => {
        ticks.push(clock.time);
        const answer = answers.shift()?.() ?? { terminal: false, retryAt: null };
        return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
      },
      backoff: (s) => waits.push(s),
      failed: (e) => failures.push(e),
      retryAfter: (e) => (e instanceof Overloaded ? e.seconds : null),
    },
    clock,
  );
  return { clock, ticks, waits, failures, ticker };
}

describe("Ticker", () => {
  it("ticks every 2 s while the event stream is not connected", async () => {
    const { clock, ticks, ticker } = setup();
    ticker.start();
    await clock.advance(10_000);
    expect(ticks.length).toBe(1 + 10_000 / POLL_MS);
  });

  it("connected: ticks on events and otherwise only every 30 s", async () => {
    const { clock, ticks, ticker } = setup();
    ticker.setLive(true);
    ticker.start();
    await clock.advance(10_000);
    expect(ticks.length).toBe(1);
    ticker.nudge();
    await clock.advance(0);
    expect(ticks.length).toBe(2);
    await clock.advance(SAFETY_MS);
    expect(ticks.length).toBe(3);
  });

  it("an event during a tick makes one more tick after it, not two", async () => {
    const clock = new FakeClock();
    let release: (o: TickOutcome) => void = () => {};
    let count = 0;
    const ticker = new Ticker(
      {
        tick: () => {
          count++;
          return new Promise<TickOutcome>((r) => (release = r));
        },
        retryAfter: () => null,
      },
      clock,
    );
    ticker.setLive(true);
    ticker.start();
    await clock.advance(0);
    ticker.nudge();
    ticker.nudge();
    release({ terminal: false, retryAt: null });
    await flush();
    await clock.advance(0);
    expect(count).toBe(2);
    release({ terminal: false, retryAt: null });
    await flush();
    await clock.advance(10_000);
    expect(count).toBe(2);
  });

  it("falls back to 2 s when the stream is lost", async () => {
    const { clock, ticks, ticker } = setup();
    ticker.setLive(true);
    ticker.start();
    await clock.advance(5_000);
    ticker.setLive(false);
    await clock.advance(POLL_MS);
    expect(ticks.length).toBe(2);
  });

  it("stops when the run is terminal", async () => {
    const { clock, ticks, ticker } = setup([() => ({ terminal: true, retryAt: null })]);
    ticker.start();
    ticker.nudge();
    await clock.advance(60_000);
    expect(ticks.length).toBe(1);
    expect(ticker.running).toBe(false);
  });

  it("ticks at a node's retryAt", async () => {
    const clock = new FakeClock();
    const retryAt = new Date(clock.time + 5_000).toISOString();
    const { ticks, ticker } = (() => {
      const ticks: number[] = [];
      const ticker = new Ticker(
        {
          tick: () => {
            ticks.push(clock.time);
            return Promise.resolve({ terminal: false, retryAt: ticks.length === 1 ? retryAt : null });
          },
          retryAfter: () => null,
        },
        clock,
      );
      return { ticks, ticker };
    })();
    ticker.setLive(true);
    ticker.start();
    await clock.advance(6_000);
    expect(ticks.length).toBe(2);
    expect((ticks[1] ?? 0) - (ticks[0] ?? 0)).toBeGreaterThanOrEqual(5_000);
  });

  it("honours Retry-After: no tick, not even an event's, before the wait ends", async () => {
    const { clock, ticks, waits, ticker } = setup([() => new Overloaded(7)]);
    ticker.start();
    await clock.advance(0);
    expect(waits).toEqual([7]);
    ticker.nudge();
    await clock.advance(6_900);
    expect(ticks.length).toBe(1);
    await clock.advance(200);
    expect(ticks.length).toBe(2);
    expect(waits).toEqual([7, null]);
  });

  it("a short Retry-After does not tick faster than the poll", async () => {
    const { clock, ticks, ticker } = setup([() => new Overloaded(0)]);
    ticker.start();
    await clock.advance(POLL_MS - 1);
    expect(ticks.length).toBe(1);
    await clock.advance(1);
    expect(ticks.length).toBe(2);
  });

  it("stops on an error that is not an overload", async () => {
    const { clock, ticks, failures, ticker } = setup([() => new Error("PermissionDenied")]);
    ticker.start();
    await clock.advance(10_000);
    expect(ticks.length).toBe(1);
    expect(failures.length).toBe(1);
  });
});
