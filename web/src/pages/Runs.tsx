import { Link, useSearchParams } from "react-router";
import { Pager, useCursorPages } from "../components/Pager";
import { Empty, ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { request } from "../lib/api";
import { duration, when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { naturalSort } from "../lib/sort";
import { RunsQuery, WorkflowsQuery } from "../queries";

const STATUSES = ["pending", "running", "completed", "failed", "cancelled"];

export function RunsPage() {
  const [params, setParams] = useSearchParams();
  const chosen = params.getAll("status");
  const workflow = params.get("workflow") ?? "";
  const filterKey = `${chosen.join(",")}|${workflow}`;
  const pages = useCursorPages(filterKey);
  const workflows = useAsync(() => request(WorkflowsQuery, { cursor: null }), "workflows");
  const loaded = useAsync(
    () => request(RunsQuery, { status: chosen.length ? chosen : null, workflow: workflow || null, cursor: pages.cursor }),
    `${filterKey}|${pages.cursor ?? ""}`,
  );
  const { error } = loaded;
  const data = loaded.loading ? null : loaded.data; // a new page or filter: no stale rows
  const slugs = new Map((workflows.data?.workflows.items ?? []).map((w) => [w.id, w.slug]));
  const update = (status: string[], wf: string) => {
    const next: [string, string][] = status.map((s) => ["status", s]);
    if (wf) next.push(["workflow", wf]);
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
      </form>
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading rows={8} />}
      {data && data.workflowRuns.items.length === 0 && (
        chosen.length || workflow
          ? <Empty>No run matches these filters. Clear a filter to see more.</Empty>
          : <Empty>No runs yet. Open a <Link to="/workflows">workflow</Link> and choose "Start a run".</Empty>
      )}
      {data && data.workflowRuns.items.length > 0 && (
        <table>
          <thead><tr><th>Run</th><th>Workflow</th><th>Status</th><th>Started</th><th>Duration</th><th>Failed node</th></tr></thead>
          <tbody>
            {data.workflowRuns.items.map((r) => {
              const slug = slugs.get(r.workflowId);
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
