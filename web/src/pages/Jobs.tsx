import { Link, useParams, useSearchParams } from "react-router";
import { ErrorView, Logs } from "../components/ErrorView";
import { Pager, useCursorPages } from "../components/Pager";
import { Empty, ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { request } from "../lib/api";
import { useCatalog } from "../lib/catalog";
import { duration, ports, when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { formatValue } from "../lib/quantity";
import { naturalCompare } from "../lib/sort";
import { JobQuery, JobsQuery } from "../queries";

const STATUSES = ["queued", "running", "success", "failed", "cancelled"];

export function JobsPage() {
  const [params, setParams] = useSearchParams();
  const search = params.get("q") ?? "";
  const status = params.get("status") ?? "";
  const pages = useCursorPages("jobs");
  const loaded = useAsync(() => request(JobsQuery, { cursor: pages.cursor }), `jobs:${pages.cursor ?? ""}`);
  const { error } = loaded;
  const data = loaded.loading ? null : loaded.data; // a new page: no stale rows while it loads
  const set = (key: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    setParams(next, { replace: true });
  };
  const items = (data?.jobs.items ?? []).filter(
    (j) => (!status || j.status === status) && (!search || `${j.package.name}/${j.function.name} ${j.id}`.toLowerCase().includes(search.toLowerCase())),
  );
  return (
    <Page title="Jobs">
      <form className="filters" role="search" aria-label="Filter the jobs of this page" onSubmit={(e) => e.preventDefault()}>
        <label>Function or job id <input type="search" value={search} onChange={(e) => set("q", e.target.value)} placeholder="package/function" /></label>
        <label>Status
          <select value={status} onChange={(e) => set("status", e.target.value)}>
            <option value="">any</option>
            {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </label>
      </form>
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading rows={8} />}
      {data && data.jobs.items.length === 0 && pages.page === 1 && (
        <Empty>No jobs yet. Jobs appear when you <Link to="/functions">execute a function</Link> or <Link to="/workflows">start a workflow run</Link>.</Empty>
      )}
      {data && data.jobs.items.length > 0 && items.length === 0 && <Empty>No job on this page matches the filter.</Empty>}
      {data && items.length > 0 && (
        <table>
          <thead>
            <tr><th>Job</th><th>Function</th><th>Status</th><th>Cache hit</th><th>Created</th><th>Finished</th></tr>
          </thead>
          <tbody>
            {items.map((j) => (
              <tr key={j.id}>
                <td><Link to={`/jobs/${j.id}`}>{j.id.slice(0, 8)}</Link></td>
                <td><Link to={`/functions/${j.function.id}`}>{j.package.name}/{j.function.name}</Link></td>
                <td><StatusBadge status={j.status} /></td>
                <td>{j.cacheHit ? "yes" : "no"}</td>
                <td>{when(j.createdAt)}</td>
                <td>{when(j.finishedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data && <Pager page={pages.page} nextCursor={data.jobs.nextCursor} onNext={pages.next} onPrevious={pages.previous} shown={data.jobs.items.length} noun="jobs" />}
    </Page>
  );
}

export function ValuesTable({ values, caption, schema }: { values: unknown; caption: string; schema?: unknown }) {
  const catalog = useCatalog();
  if (!values || typeof values !== "object") return <p>{caption}: none</p>;
  const types = new Map(ports(schema).map(([n, p]) => [n, p.type]));
  return (
    <table>
      <caption>{caption}</caption>
      <tbody>
        {Object.entries(values as Record<string, unknown>).sort(([a], [b]) => naturalCompare(a, b)).map(([k, v]) => (
          <tr key={k}><th scope="row">{k}</th><td>{formatValue(v, types.get(k) ?? "", catalog)}</td></tr>
        ))}
      </tbody>
    </table>
  );
}

export function JobPage() {
  const { id = "" } = useParams();
  const { data, error } = useAsync(() => request(JobQuery, { id }), id);
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const job = data.job;
  return (
    <Page title={<>Job {job.id.slice(0, 8)} <StatusBadge status={job.status} /></>} documentTitle={`Job ${job.id.slice(0, 8)} ${job.status}`}>
      <dl className="facts">
        <dt>Function</dt><dd><Link to={`/functions/${job.function.id}`}>{job.package.name}/{job.function.name}</Link></dd>
        <dt>Cache hit</dt><dd>{job.cacheHit ? "yes" : "no"}</dd>
        <dt>Created</dt><dd>{when(job.createdAt)}</dd>
        <dt>Ran for</dt><dd>{duration(job.startedAt, job.finishedAt)}</dd>
      </dl>
      {job.error != null && <ErrorView error={job.error} logs={job.logs} />}
      <ValuesTable values={job.inputs} caption="Inputs" />
      <ValuesTable values={job.outputs} caption="Outputs" />
      <h2>Logs</h2>
      <Logs logs={job.logs} />
    </Page>
  );
}
