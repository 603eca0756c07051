// A Gantt chart of a run: one row per node that started, its bar from start to finish on the
// run's clock (a running node's bar grows to now); a click selects the node.
import { useMemo } from "react";
import { naturalCompare } from "../lib/sort";

export interface TimelineItem {
  key: string;
  status: string;
  attempt: number;
  startedAt: string | null | undefined;
  finishedAt: string | null | undefined;
}

const ms = (iso: string | null | undefined) => (iso ? new Date(iso).getTime() : null);

function span(total: number): string {
  return total < 1000 ? `${Math.round(total)} ms` : `${(total / 1000).toFixed(2)} s`;
}

export function Timeline({ items, runStart, runEnd, selected, onSelect }: {
  items: readonly TimelineItem[];
  runStart: string;
  runEnd: string | null | undefined;
  selected: string | null;
  onSelect: (key: string) => void;
}) {
  const rows = useMemo(() => {
    const started = items.filter((i) => i.startedAt);
    return started.sort((a, b) => (ms(a.startedAt) ?? 0) - (ms(b.startedAt) ?? 0) || naturalCompare(a.key, b.key));
  }, [items]);
  const t0 = ms(runStart) ?? 0;
  const now = Date.now();
  const ends = rows.map((r) => ms(r.finishedAt) ?? now);
  const t1 = Math.max(ms(runEnd) ?? 0, ...ends, t0 + 1);
  const total = t1 - t0;
  if (rows.length === 0) return <p className="empty">No node has started yet: the timeline fills as jobs run.</p>;
  return (
    <div className="timeline" role="list" aria-label="Timeline">
      <div className="timeline-scale" aria-hidden="true"><span>0</span><span>{span(total / 2)}</span><span>{span(total)}</span></div>
      {rows.map((r) => {
        const start = (ms(r.startedAt) ?? t0) - t0;
        const end = (ms(r.finishedAt) ?? now) - t0;
        const left = (100 * start) / total;
        const width = Math.max((100 * (end - start)) / total, 0.4);
        const label = `${r.key}: ${r.status}${r.attempt > 1 ? `, attempt ${r.attempt}` : ""}, started at +${span(start)}, ${r.finishedAt ? `took ${span(end - start)}` : "still running"}`;
        return (
          <div role="listitem" key={r.key} className={`timeline-row${selected === r.key ? " selected" : ""}`}>
            <button type="button" className="timeline-key" onClick={() => onSelect(r.key)} aria-label={label} title={label}>{r.key}</button>
            <div className="timeline-track">
              <div className={`timeline-bar status-${r.status}`} style={{ left: `${left}%`, width: `${width}%` }} />
            </div>
          </div>
        );
      })}
    </div>
  );
}
