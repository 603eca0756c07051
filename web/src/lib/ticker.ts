// When the run page ticks its run. Events first: a tick when an event says one of the run's jobs
// (or the run) changed, a slow safety tick while the event stream is connected, the
// specification's 2 s tick only while it is not; a node's `retryAt` is a tick of its own. A wait
// the server asks for (Retry-After on an overloaded tick) delays the next tick, whatever wants it.
// Pure of the DOM and the network: the tick and the clock are given, so tests drive it.

export const POLL_MS = 2000; // the specification's polling period of the run page
export const SAFETY_MS = 30_000; // connected: a tick anyway now and then, should an event be lost
const RETRY_AT_MARGIN_MS = 250; // the server's clock decides whether a retry is due
const MIN_RETRY_AT_MS = 1000; // a clock behind the server's must not tick in a loop

export interface TickOutcome {
  terminal: boolean;
  retryAt: string | null;
}

export interface Clock {
  now: () => number;
  setTimeout: (run: () => void, ms: number) => unknown;
  clearTimeout: (handle: unknown) => void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (run, ms) => setTimeout(run, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface TickerHooks {
  tick: () => Promise<TickOutcome>;
  /** Seconds the server asked to wait (null: the wait is over). */
  backoff?: (seconds: number | null) => void;
  /** A failure the ticker does not retry: it stops. */
  failed?: (error: unknown) => void;
  /** Seconds to wait if `error` is an overload answer, else null. */
  retryAfter: (error: unknown) => number | null;
}

export class Ticker {
  private live = false;
  private stopped = true;
  private inFlight = false;
  private wanted = false; // an event arrived while a tick was in flight
  private notBefore = 0;
  private timer: unknown = null;
  private due = Infinity;
  private retryAt: number | null = null;

  constructor(
    private readonly hooks: TickerHooks,
    private readonly clock: Clock = realClock,
  ) {}

  /** Tick now, then keep ticking until the run is terminal or `stop`. */
  start(): void {
    this.stopped = false;
    this.at(this.clock.now());
  }

  stop(): void {
    this.stopped = true;
    this.clear();
  }

  get running(): boolean {
    return !this.stopped;
  }

  /** The event stream connected (true) or lost (false). */
  setLive(live: boolean): void {
    this.live = live;
    if (!live && !this.inFlight) this.at(this.clock.now() + POLL_MS);
  }

  /** An event about the run: tick as soon as allowed. */
  nudge(): void {
    if (this.stopped) return;
    if (this.inFlight) this.wanted = true;
    else this.at(this.clock.now());
  }

  /** The next tick at `when` unless one is due sooner; never before the server's wait ends. */
  private at(when: number, replace = false): void {
    if (this.stopped) return;
    const at = Math.max(when, this.notBefore);
    if (!replace && this.timer !== null && this.due <= at) return;
    this.clear();
    this.due = at;
    this.timer = this.clock.setTimeout(() => this.fire(), Math.max(0, at - this.clock.now()));
  }

  private clear(): void {
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
    this.due = Infinity;
  }

  private fire(): void {
    this.timer = null;
    this.due = Infinity;
    if (this.stopped || this.inFlight) return;
    this.inFlight = true;
    this.wanted = false;
    this.hooks.tick().then(
      (outcome) => this.answered(outcome),
      (error: unknown) => this.refused(error),
    );
  }

  private answered(outcome: TickOutcome): void {
    this.inFlight = false;
    if (this.stopped) return;
    if (outcome.terminal) {
      this.stop();
      return;
    }
    if (this.notBefore) {
      this.notBefore = 0;
      this.hooks.backoff?.(null);
    }
    const now = this.clock.now();
    this.retryAt = outcome.retryAt ? Date.parse(outcome.retryAt) : null;
    let next = now + (this.live ? SAFETY_MS : POLL_MS);
    if (this.retryAt !== null && !Number.isNaN(this.retryAt)) {
      next = Math.min(next, now + Math.max(MIN_RETRY_AT_MS, this.retryAt - now + RETRY_AT_MARGIN_MS));
    }
    if (this.wanted) next = now;
    this.at(next, true);
  }

  private refused(error: unknown): void {
    this.inFlight = false;
    if (this.stopped) return;
    const wait = this.hooks.retryAfter(error);
    if (wait === null) {
      this.stop();
      this.hooks.failed?.(error);
      return;
    }
    // Overloaded: nothing ticks before the server's wait ends (nor sooner than the poll would).
    const now = this.clock.now();
    this.notBefore = now + wait * 1000;
    this.hooks.backoff?.(wait);
    this.at(this.live ? now : now + POLL_MS, true);
  }
}
