// The run page's live run: it ticks its run when an event says one of the run's jobs (or the run)
// changed, over the `events` subscription (graphql-ws) filtered to the run (`run`), with a slow
// safety tick; the 2 s tick only while the subscription is not connected; the server's
// Retry-After delays the next tick.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { RunFieldsFragment, RunPlanFieldsFragment } from "../gql/graphql";
import { LiveRunQuery, RunEventsSubscription, RunPlanQuery, TickMutation } from "./liveRun.graphql";
import { ApiError, request, requestOnce, subscribe } from "./api";
import { currentSession } from "./auth";
import { runLayout, warmLayout } from "./runLayout";
import { SAFETY_MS, Ticker } from "./ticker";

/** What never changes in a run: its plan as drawn, inputs, version, function versions. */
export type RunPlan = RunPlanFieldsFragment;
/** What a tick may change of a run. */
export type RunState = RunFieldsFragment;
/** A run as the page shows it: what never changes (read once) and its latest state. */
export type LiveRun = RunPlanFieldsFragment & RunState;

export const TERMINAL = new Set(["completed", "failed", "cancelled"]);
/** The events that may change what a tick of the run does. */
export const RUN_EVENT_TYPES = ["calcgraph.job.*", "calcgraph.run.*"];

/** "live": ticking on events; "polling": every 2 s; "idle": nothing to tick. */
export type LiveMode = "live" | "polling" | "idle";

/** Whether an event (its `data`) is about the run `id`. */
export function concernsRun(data: unknown, id: string): boolean {
  return typeof data === "object" && data !== null && (data as { run_id?: unknown }).run_id === id;
}

/** The earliest retry of the run's nodes still to come (the run's own `retryAt`). */
export function earliestRetryAt(states: readonly { retryAt: string | null }[]): string | null {
  let first: string | null = null;
  for (const s of states) {
    if (s.retryAt && (first === null || Date.parse(s.retryAt) < Date.parse(first))) first = s.retryAt;
  }
  return first;
}

/** The state to show once `next` arrived (a tick's or a cancel's answer): the older of two
 * states of the same run (by revision; answers may arrive out of order) never replaces the
 * newer. */
export function advance(prev: RunState | null, next: RunState): RunState {
  return prev && prev.id === next.id && prev.revision > next.revision ? prev : next;
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}

/** A run's first read: its plan and its first state, two requests sent together. The plan is
 * laid out in a worker as soon as it arrives (lib/runLayout), while the server still builds the
 * state and the page loads and draws the rest. */
function readRun(id: string) {
  warmLayout();
  // The plan first: the server takes the requests in the order they arrive.
  const plan = request(RunPlanQuery, { id });
  // Its page shows a failed layout (it asks runLayout again).
  plan.then((r) => runLayout(r.workflowRun)).catch(() => undefined);
  const state = request(LiveRunQuery, { id, types: RUN_EVENT_TYPES });
  return { plan, state };
}

/** How long a run read at start-up stays good for its page (a page opened later reads again). */
const EARLY_MS = 10_000;
let early: { id: string; at: number; read: ReturnType<typeof readRun> } | null = null;

/** The run page's first read, started when the app is loaded at a run's address (`path`, under
 * the app's base) with a session: it goes out while the rest of the app's modules are evaluated
 * and its first page drawn, instead of after them. The page takes it (`firstRead`). */
export function readRunEarly(path: string): void {
  const found = /^\/ui\/runs\/([^/]+)\/?$/.exec(path);
  if (!found?.[1] || !currentSession()) return;
  const read = readRun(decodeURIComponent(found[1]));
  // Its page reports a failure; a page never opened leaves it unread.
  read.plan.catch(() => undefined);
  read.state.catch(() => undefined);
  early = { id: decodeURIComponent(found[1]), at: performance.now(), read };
}

/** The start-up read of run `id` when it is still fresh, else a new read. Either way the start-up
 * read is used at most once. */
export function firstRead(id: string): ReturnType<typeof readRun> {
  const taken = early;
  early = null;
  return taken && taken.id === id && performance.now() - taken.at < EARLY_MS ? taken.read : readRun(id);
}

export function useLiveRun(id: string) {
  const [plan, setPlan] = useState<RunPlan | null>(null);
  const [state, setState] = useState<RunState | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [mode, setMode] = useState<LiveMode>("idle");
  const [backoff, setBackoff] = useState<number | null>(null);
  const arrived = useRef<number | null>(null);
  const markDrawn = useRef<(() => void) | null>(null);
  useEffect(() => {
    let live = true;
    // The first tick waits for the run to be drawn (the page says so: `drawn`): on a 1,000-node
    // run its answer would otherwise arrive and be parsed in the middle of the first draw.
    let drawn!: () => void;
    const firstDrawn = new Promise<void>((resolve) => { drawn = resolve; });
    markDrawn.current = drawn;
    let stopSocket: (() => void) | null = null;
    let resubscribe: ReturnType<typeof setTimeout> | null = null;
    const apply = (next: RunState) => {
      arrived.current = performance.now();
      setState((prev) => advance(prev, next));
    };
    const ticker = new Ticker({
      tick: async () => {
        await firstDrawn;
        const { tickRun } = await requestOnce(TickMutation, { id });
        const terminal = TERMINAL.has(tickRun.status);
        if (live) {
          apply(tickRun);
          if (terminal) finish();
        }
        return { terminal, retryAt: earliestRetryAt(tickRun.nodeStates) };
      },
      retryAfter: (e) => (e instanceof ApiError ? e.retryAfter : null),
      backoff: (seconds) => live && setBackoff(seconds),
      failed: (e) => {
        if (!live) return;
        setError(asError(e));
        finish();
      },
    });
    const finish = () => {
      ticker.stop();
      stopSocket?.();
      stopSocket = null;
      if (resubscribe) clearTimeout(resubscribe);
      setMode("idle");
    };
    // No events (the socket is blocked or dropped, or the stream ended or was refused): tick
    // every 2 s, and try the socket again now and then.
    const fallBack = () => {
      stopSocket?.();
      stopSocket = null;
      if (!live || !ticker.running) return;
      ticker.setLive(false);
      setMode("polling");
      if (resubscribe) clearTimeout(resubscribe);
      resubscribe = setTimeout(() => live && ticker.running && follow(null), SAFETY_MS);
    };
    const follow = (after: string | null) => {
      stopSocket = subscribe(RunEventsSubscription, { run: id, types: RUN_EVENT_TYPES, after }, {
        next: (data) => {
          if (live && concernsRun(data.events.data, id)) ticker.nudge();
        },
        connected: () => {
          if (!live || !ticker.running) return;
          ticker.setLive(true);
          setMode("live");
          // Reconnected after a loss: whatever happened meanwhile is read by one tick.
          if (after === null) ticker.nudge();
        },
        error: fallBack,
        lost: fallBack,
        complete: fallBack,
      });
    };
    // The plan once, beside the first state; the ticks bring the state alone.
    const { plan: planRead, state: stateRead } = firstRead(id);
    planRead.then(
      (r) => live && setPlan(r.workflowRun),
      (e: unknown) => live && setError(asError(e)),
    );
    stateRead.then(
      (r) => {
        if (!live) return;
        apply(r.workflowRun);
        if (TERMINAL.has(r.workflowRun.status)) return;
        setMode("polling");
        // Subscribed from the cursor read with the run: no event between the two is missed.
        follow(r.events.nextCursor);
        ticker.start();
      },
      (e: unknown) => live && setError(asError(e)),
    );
    return () => {
      live = false;
      drawn();
      ticker.stop();
      stopSocket?.();
      if (resubscribe) clearTimeout(resubscribe);
    };
  }, [id]);
  // The page drew the run: ticks may go.
  const drawn = useCallback(() => markDrawn.current?.(), []);
  // An answer of this page's own mutation (cancel): shown at once, the same rule as updates.
  const show = useCallback((next: RunState) => setState((prev) => advance(prev, next)), []);
  // The run of this page's id only: another run's (the page's previous id) is not shown as it.
  const current = plan?.id === id ? plan : null;
  const run: LiveRun | null = useMemo(() => (current && state?.id === current.id ? { ...current, ...state } : null), [current, state]);
  return { plan: current, run, error, mode, backoff, arrived, show, drawn };
}
