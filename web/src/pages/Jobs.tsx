import { Link, useParams } from "react-router";
import { ErrorView, Logs } from "../components/ErrorView";
import { DateRange, SearchField, useFilterParams } from "../components/Filters";
import { Pager, useCursorPages } from "../components/Pager";
import { Empty, ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { request } from "../lib/api";
import { useCatalog } from "../lib/catalog";
import { duration, ports, when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { formatValue } from "../lib/quantity";
import { naturalCompare } from "../lib/sort";
import { JobQuery, JobsQuery } from "./Jobs.graphql";

// A job's statuses as the server lists them (a cancelled job ends failed, kind cancelled).
const STATUSES = ["queued", "running", "success", "failed"];

export function JobsPage() {
  const [params, set] = useFilterParams();
  const variables = {
    function: params.get("function") || null,
    status: params.getAll("status").length ? params.getAll("status") : null,
    createdAfter: params.get("after") || null,
    createdBefore: params.get("before") || null,
  };
  const filterKey = JSON.stringify(variables);
  const filtered = Object.values(variables).some((v) => v !== null);
  const pages = useCursorPages(filterKey);
  const loaded = useAsync(() => request(JobsQuery, { ...variables, cursor: pages.cursor }), `jobs:${filterKey}:${pages.cursor ?? ""}`);
  const { error, data } = loaded;
  const status = params.get("status") ?? "";
  const items = data?.jobs.items ?? [];
  return (
    <Page title="Jobs">
      <form className="filters" role="search" aria-label="Filter jobs" onSubmit={(e) => e.preventDefault()}>
        <SearchField label="Function" value={params.get("function") ?? ""} onSearch={(v) => set("function", v)} placeholder="package/function" />
        <label>Status
          <select value={status} onChange={(e) => set("status", e.target.value)}>
            <option value="">any</option>
            {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </label>
        <DateRange noun="Created" after={params.get("after") ?? ""} before={params.get("before") ?? ""} onAfter={(v) => set("after", v)} onBefore={(v) => set("before", v)} />
      </form>
      {error && <ErrorBox error={error} />}
      {loaded.loading && <Loading rows={8} />}
      {data && items.length === 0 && pages.page === 1 && (
        filtered
          ? <Empty>No job matches these filters. Clear a filter to see more.</Empty>
          : <Empty>No jobs yet. Jobs appear when you <Link to="/functions">execute a function</Link> or <Link to="/workflows">start a workflow run</Link>.</Empty>
      )}
      {items.length > 0 && (
        <table aria-busy={loaded.refreshing}>
          <thead>
            <tr><th>Job</th><th>Function</th><th>Status</th><th>Run and node</th><th>Cache hit</th><th>Created</th><th>Finished</th></tr>
          </thead>
          <tbody>
            {items.map((j) => (
              <tr key={j.id}>
                <td><Link to={`/jobs/${j.id}`}>{j.id.slice(0, 8)}</Link></td>
                <td><Link to={`/functions/${j.function.id}`}>{j.package.name}/{j.function.name}</Link></td>
                <td><StatusBadge status={j.status} /></td>
                <td>{j.run ? <RunLink run={j.run} nodeKey={j.nodeKey} /> : "—"}</td>
                <td>{j.cacheHit ? "yes" : "no"}</td>
                <td>{when(j.createdAt)}</td>
                <td>{when(j.finishedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data && <Pager page={pages.page} nextCursor={data.jobs.nextCursor} onNext={pages.next} onPrevious={pages.previous} shown={items.length} noun="jobs" />}
    </Page>
  );
}

/** The run a job belongs to, opened on the job's node. */
function RunLink({ run, nodeKey }: { run: { id: string; workflow?: { slug: string } | null }; nodeKey?: string | null }) {
  const to = `/runs/${run.id}${nodeKey ? `?node=${encodeURIComponent(nodeKey)}` : ""}`;
  return <Link to={to} title={`Run ${run.id.slice(0, 8)}`}>{run.workflow?.slug ?? run.id.slice(0, 8)}{nodeKey ? ` · ${nodeKey}` : ""}</Link>;
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
  const { data, error } = useAsync(() => request(JobQuery, { id }), `job:${id}`);
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const job = data.job;
  return (
    <Page title={<>Job {job.id.slice(0, 8)} <StatusBadge status={job.status} /></>} documentTitle={`Job ${job.id.slice(0, 8)} ${job.status}`}>
      <dl className="facts">
        <dt>Function</dt><dd><Link to={`/functions/${job.function.id}`}>{job.package.name}/{job.function.name}</Link></dd>
        {job.run && (
          <>
            <dt>Workflow</dt><dd>{job.run.workflow ? <Link to={`/workflows/${job.run.workflow.slug}`}>{job.run.workflow.name}</Link> : "—"}{job.run.workflowVersion ? ` v${job.run.workflowVersion.version}` : ""}</dd>
            <dt>Run</dt><dd><Link to={`/runs/${job.run.id}`}>{job.run.id.slice(0, 8)}</Link> <StatusBadge status={job.run.status} /></dd>
            <dt>Node</dt><dd>{job.nodeKey ? <Link to={`/runs/${job.run.id}?node=${encodeURIComponent(job.nodeKey)}`}>{job.nodeKey}</Link> : "—"}</dd>
          </>
        )}
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
