import { Link, useSearchParams } from "react-router";
import { ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { request } from "../lib/api";
import { duration, when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { RunsQuery, WorkflowsQuery } from "../queries";

const STATUSES = ["pending", "running", "completed", "failed"];

export function RunsPage() {
  const [params, setParams] = useSearchParams();
  const chosen = params.getAll("status");
  const { data, error } = useAsync(
    async () => {
      const [runs, workflows] = await Promise.all([
        request(RunsQuery, { status: chosen.length ? chosen : null, cursor: null }),
        request(WorkflowsQuery, { cursor: null }),
      ]);
      return { runs, slugs: new Map(workflows.workflows.items.map((w) => [w.id, w.slug])) };
    },
    chosen.join(","),
  );
  const toggle = (status: string) => {
    const next = chosen.includes(status) ? chosen.filter((s) => s !== status) : [...chosen, status];
    setParams(next.map((s): [string, string] => ["status", s]));
  };
  return (
    <Page title="Runs">
      <fieldset className="filters">
        <legend>Status</legend>
        {STATUSES.map((s) => (
          <label key={s}>
            <input type="checkbox" checked={chosen.includes(s)} onChange={() => toggle(s)} /> {s}
          </label>
        ))}
      </fieldset>
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading />}
      {data && (
        <table>
          <thead><tr><th>Run</th><th>Workflow</th><th>Status</th><th>Started</th><th>Duration</th><th>Failed node</th></tr></thead>
          <tbody>
            {data.runs.workflowRuns.items.map((r) => (
              <tr key={r.id}>
                <td><Link to={`/runs/${r.id}`}>{r.id.slice(0, 8)}</Link></td>
                <td>{data.slugs.get(r.workflowId) ?? r.workflowId.slice(0, 8)} v{r.workflowVersion?.version}</td>
                <td><StatusBadge status={r.status} /></td>
                <td>{when(r.startedAt)}</td>
                <td>{duration(r.startedAt, r.completedAt)}</td>
                <td>{r.firstFailedNodeKey ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data && data.runs.workflowRuns.items.length === 0 && <p>No runs.</p>}
    </Page>
  );
}
