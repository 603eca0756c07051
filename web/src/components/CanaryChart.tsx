// A running canary in one small inline SVG: the split asked for against the calls each version
// got, and the candidate's error rate and p95 against their maxima (the server's figures).

export interface CanaryFigures {
  split: Record<string, number>;
  routed: Record<string, number>;
  jobs: number;
  failed: number;
  errorRate: number | null;
  latencyP95Ms: number | null;
  errorRateMax: number | null;
  latencyP95MaxMs: number | null;
}

const W = 520;
const LABEL = 150;
const BAR = W - LABEL - 90;

function Meter({ y, label, value, max, text }: { y: number; label: string; value: number | null; max: number | null; text: string }) {
  const scale = Math.max(value ?? 0, max ?? 0) * 1.25 || 1;
  const width = value === null ? 0 : (BAR * value) / scale;
  const over = value !== null && max !== null && value > max;
  return (
    <g transform={`translate(0 ${y})`}>
      <text x={0} y={14} className="chart-label">{label}</text>
      <rect x={LABEL} y={2} width={BAR} height={16} className="chart-track" />
      <rect x={LABEL} y={2} width={width} height={16} className={over ? "chart-bad" : "chart-good"} />
      {max !== null && <line x1={LABEL + (BAR * max) / scale} x2={LABEL + (BAR * max) / scale} y1={-2} y2={22} className="chart-limit" />}
      <text x={LABEL + BAR + 6} y={14} className="chart-value">{text}</text>
    </g>
  );
}

export function CanaryChart({ figures, candidate }: { figures: CanaryFigures; candidate: string }) {
  const versions = Object.keys(figures.split);
  const total = Object.values(figures.routed).reduce((a, b) => a + b, 0);
  const rate = figures.errorRate === null ? "no job yet" : `${(figures.errorRate * 100).toFixed(1)}%`;
  const rateMax = figures.errorRateMax === null ? "" : ` (max ${(figures.errorRateMax * 100).toFixed(1)}%)`;
  const p95 = figures.latencyP95Ms === null ? "no job yet" : `${Math.round(figures.latencyP95Ms)} ms`;
  const p95Max = figures.latencyP95MaxMs === null ? "" : ` (max ${figures.latencyP95MaxMs} ms)`;
  const shown = versions.slice(0, 6);
  const height = 70 + shown.length * 26;
  const summary =
    `Candidate ${candidate}: ${figures.failed} of ${figures.jobs} finished jobs failed, error rate ${rate}${rateMax}, p95 ${p95}${p95Max}. ` +
    shown.map((v) => `${v}: ${figures.split[v]}% asked, ${figures.routed[v] ?? 0} of ${total} calls`).join("; ");
  return (
    <figure className="canary-chart">
      <svg viewBox={`0 0 ${W} ${height}`} width="100%" role="img" aria-label={summary}>
        <Meter y={4} label={`Error rate of ${candidate}`} value={figures.errorRate} max={figures.errorRateMax} text={rate} />
        <Meter y={34} label={`p95 of ${candidate}`} value={figures.latencyP95Ms} max={figures.latencyP95MaxMs} text={p95} />
        {shown.map((v, i) => {
          const got = total ? (figures.routed[v] ?? 0) / total : 0;
          return (
            <g key={v} transform={`translate(0 ${70 + i * 26})`}>
              <text x={0} y={14} className="chart-label">{v}</text>
              <rect x={LABEL} y={2} width={BAR} height={16} className="chart-track" />
              <rect x={LABEL} y={2} width={(BAR * (figures.split[v] ?? 0)) / 100} height={7} className="chart-asked" />
              <rect x={LABEL} y={11} width={BAR * got} height={7} className="chart-good" />
              <text x={LABEL + BAR + 6} y={14} className="chart-value">{`${figures.split[v]}% / ${(got * 100).toFixed(0)}%`}</text>
            </g>
          );
        })}
      </svg>
      <figcaption>{summary}. Upper bar of a version: its share asked; lower bar: the share of calls it got.{versions.length > shown.length ? ` ${versions.length - shown.length} more versions not drawn.` : ""}</figcaption>
    </figure>
  );
}
