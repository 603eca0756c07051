import { Link, useSearchParams } from "react-router";
import { DateRange } from "../components/Filters";
import { Pager, useCursorPages } from "../components/Pager";
import { Empty, ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { request } from "../lib/api";
import { duration, when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { naturalSort } from "../lib/sort";
import { RunsQuery, WorkflowsQuery } from "./Runs.graphql";

const STATUSES = ["pending", "running", "completed", "failed", "cancelled"];

export function RunsPage() {
  const [params, setParams] = useSearchParams();
  const chosen = params.getAll("status");
  const workflow = params.get("workflow") ?? "";
  const after = params.get("after") ?? "";
  const before = params.get("before") ?? "";
  const filterKey = `${chosen.join(",")}|${workflow}|${after}|${before}`;
  const pages = useCursorPages(filterKey);
  const workflows = useAsync(() => request(WorkflowsQuery, { cursor: null }), "workflows");
  const loaded = useAsync(
    () => request(RunsQuery, { status: chosen.length ? chosen : null, workflow: workflow || null, cursor: pages.cursor, startedAfter: after || null, startedBefore: before || null }),
    `runs:${filterKey}|${pages.cursor ?? ""}`,
  );
  const { error, data } = loaded; // a new page or filter: no rows until its answer (cached ones show at once)
  const update = (status: string[], wf: string, range: [string, string] = [after, before]) => {
    const next: [string, string][] = status.map((s) => ["status", s]);
    if (wf) next.push(["workflow", wf]);
    if (range[0]) next.push(["after", range[0]]);
    if (range[1]) next.push(["before", range[1]]);
    setParams(next, { replace: true });
  };
  const toggle = (status: string) => update(chosen.includes(status) ? chosen.filter((s) => s !== status) : [...chosen, status], workflow);
  return (
    <Page title="Runs">
      <form className="filters" role="search" aria-label="Filter runs" onSubmit={(e) => e.preventDefault()}>
        <label>Workflow
          <select value={workflow} onChange={(e) => update(chosen, e.target.value)}>
            <option value="">all workflows</option>
            {naturalSort(workflows.data?.workflows.items ?? [], (w) => w.slug).map((w) => <option key={w.id} value={w.slug}>{w.slug}</option>)}
          </select>
        </label>
        <fieldset>
          <legend>Status</legend>
          {STATUSES.map((s) => (
            <label key={s}>
              <input type="checkbox" checked={chosen.includes(s)} onChange={() => toggle(s)} /> {s}
            </label>
          ))}
        </fieldset>
        <DateRange noun="Started" after={after} before={before} onAfter={(v) => update(chosen, workflow, [v, before])} onBefore={(v) => update(chosen, workflow, [after, v])} />
      </form>
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading rows={8} />}
      {data && data.workflowRuns.items.length === 0 && (
        chosen.length || workflow || after || before
          ? <Empty>No run matches these filters. Clear a filter to see more.</Empty>
          : <Empty>No runs yet. Open a <Link to="/workflows">workflow</Link> and choose "Start a run".</Empty>
      )}
      {data && data.workflowRuns.items.length > 0 && (
        <table>
          <thead><tr><th>Run</th><th>Workflow</th><th>Status</th><th>Started</th><th>Duration</th><th>Failed node</th></tr></thead>
          <tbody>
            {data.workflowRuns.items.map((r) => {
              const slug = r.workflow?.slug;
              return (
                <tr key={r.id}>
                  <td><Link to={`/runs/${r.id}`}>{r.id.slice(0, 8)}</Link></td>
                  <td>{slug ? <Link to={`/workflows/${slug}`}>{slug}</Link> : r.workflowId.slice(0, 8)} v{r.workflowVersion?.version}</td>
                  <td><StatusBadge status={r.status} /></td>
                  <td>{when(r.startedAt)}</td>
                  <td>{duration(r.startedAt, r.completedAt)}</td>
                  <td>{r.firstFailedNodeKey ? <Link to={`/runs/${r.id}?node=${encodeURIComponent(r.firstFailedNodeKey)}`}>{r.firstFailedNodeKey}</Link> : ""}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {data && <Pager page={pages.page} nextCursor={data.workflowRuns.nextCursor} onNext={pages.next} onPrevious={pages.previous} shown={data.workflowRuns.items.length} noun="runs" />}
    </Page>
  );
}
