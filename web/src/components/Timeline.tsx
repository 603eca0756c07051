// A Gantt chart of a run: one row per node that started, its bar from start to finish on the
// run's clock (a running node's bar grows to now), a retried node's earlier attempts each a bar
// of their own before it; a click selects the node.
import { memo, useMemo } from "react";
import { naturalCompare } from "../lib/sort";

export interface TimelineItem {
  key: string;
  status: string;
  attempt: number;
  startedAt: string | null | undefined;
  finishedAt: string | null | undefined;
  /** The earlier attempts' jobs (failed and retried), oldest first. */
  earlier?: readonly { attempt: number; createdAt: string; finishedAt?: string | null }[];
}

interface Bar {
  attempt: number;
  status: string;
  start: number;
  /** null while it runs: the bar grows to now. */
  end: number | null;
}

const ms = (iso: string | null | undefined) => (iso ? new Date(iso).getTime() : null);

function span(total: number): string {
  return total < 1000 ? `${Math.round(total)} ms` : `${(total / 1000).toFixed(2)} s`;
}

// Memoised: a 1,000-row timeline is redrawn when its items or the selection change, not on every
// render of the run page.
export const Timeline = memo(function Timeline({ items, runStart, runEnd, selected, onSelect }: {
  items: readonly TimelineItem[];
  runStart: string;
  runEnd: string | null | undefined;
  selected: string | null;
  onSelect: (key: string) => void;
}) {
  const t0 = ms(runStart) ?? 0;
  const rows = useMemo(() => {
    const withBars = items.map((i) => {
      const bars: Bar[] = (i.earlier ?? []).map((e) => ({
        attempt: e.attempt, status: "failed", start: ms(e.createdAt) ?? t0, end: ms(e.finishedAt),
      }));
      if (i.startedAt) {
        bars.push({ attempt: i.attempt, status: i.status, start: ms(i.startedAt) ?? t0, end: ms(i.finishedAt) });
      }
      return { ...i, bars };
    });
    const started = withBars.flatMap((i) => {
      const head = i.bars[0];
      const tail = i.bars[i.bars.length - 1];
      return head && tail ? [{ ...i, head, tail }] : [];
    });
    return started.sort((a, b) => a.head.start - b.head.start || naturalCompare(a.key, b.key));
  }, [items, t0]);
  const now = Date.now();
  const ends = rows.flatMap((r) => r.bars.map((b) => b.end ?? now));
  const t1 = Math.max(ms(runEnd) ?? 0, ...ends, t0 + 1);
  const total = t1 - t0;
  if (rows.length === 0) return <p className="empty">No node has started yet: the timeline fills as jobs run.</p>;
  return (
    <div className="timeline" role="list" aria-label="Timeline">
      <div className="timeline-scale" aria-hidden="true"><span>0</span><span>{span(total / 2)}</span><span>{span(total)}</span></div>
      {rows.map((r) => {
        const first = r.head.start - t0;
        const last = r.tail;
        const attempts = r.bars.length > 1 ? `, ${r.bars.length} attempts` : r.attempt > 1 ? `, attempt ${r.attempt}` : "";
        const label = `${r.key}: ${r.status}${attempts}, started at +${span(first)}, ${last.end === null ? "still running" : `took ${span(last.end - r.head.start)}`}`;
        return (
          <div role="listitem" key={r.key} className={`timeline-row${selected === r.key ? " selected" : ""}`}>
            <button type="button" className="timeline-key" onClick={() => onSelect(r.key)} aria-label={label} title={label}>{r.key}</button>
            <div className="timeline-track">
              {r.bars.map((b) => {
                const start = b.start - t0;
                const left = (100 * start) / total;
                const end = b.end ?? now;
                const width = Math.max((100 * (end - b.start)) / total, 0.4);
                const title = `attempt ${b.attempt}: ${b.status}, +${span(start)}, ${b.end === null ? "still running" : span(end - b.start)}`;
                return <div key={b.attempt} className={`timeline-bar status-${b.status}`} data-attempt={b.attempt} title={title} style={{ left: `${left}%`, width: `${width}%` }} />;
              })}
            </div>
          </div>
        );
      })}
    </div>
  );
});
