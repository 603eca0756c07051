import { Link, useParams } from "react-router";
import { ErrorBox, Loading, Page, StatusBadge } from "../components/Status";
import { request } from "../lib/api";
import { duration, showValue, when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { JobQuery, JobsQuery } from "../queries";

export function JobsPage() {
  const { data, error } = useAsync(() => request(JobsQuery, { cursor: null }), "jobs");
  return (
    <Page title="Jobs">
      {error && <ErrorBox error={error} />}
      {!data && !error && <Loading />}
      {data && (
        <table>
          <thead>
            <tr><th>Job</th><th>Function</th><th>Status</th><th>Cache hit</th><th>Created</th><th>Finished</th></tr>
          </thead>
          <tbody>
            {data.jobs.items.map((j) => (
              <tr key={j.id}>
                <td><Link to={`/jobs/${j.id}`}>{j.id.slice(0, 8)}</Link></td>
                <td>{j.package.name}/{j.function.name}</td>
                <td><StatusBadge status={j.status} /></td>
                <td>{j.cacheHit ? "yes" : "no"}</td>
                <td>{when(j.createdAt)}</td>
                <td>{when(j.finishedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Page>
  );
}

export function ValuesTable({ values, caption }: { values: unknown; caption: string }) {
  if (!values || typeof values !== "object") return <p>{caption}: none</p>;
  return (
    <table>
      <caption>{caption}</caption>
      <tbody>
        {Object.entries(values as Record<string, unknown>).map(([k, v]) => (
          <tr key={k}><th scope="row">{k}</th><td>{showValue(v)}</td></tr>
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
    <Page title={<>Job {job.id.slice(0, 8)} <StatusBadge status={job.status} /></>}>
      <dl className="facts">
        <dt>Function</dt><dd><Link to={`/functions/${job.function.id}`}>{job.package.name}/{job.function.name}</Link></dd>
        <dt>Cache hit</dt><dd>{job.cacheHit ? "yes" : "no"}</dd>
        <dt>Created</dt><dd>{when(job.createdAt)}</dd>
        <dt>Ran for</dt><dd>{duration(job.startedAt, job.finishedAt)}</dd>
      </dl>
      <ValuesTable values={job.inputs} caption="Inputs" />
      <ValuesTable values={job.outputs} caption="Outputs" />
      {job.error != null && <pre className="problem">{JSON.stringify(job.error, null, 2)}</pre>}
      <h2>Logs</h2>
      <pre className="logs">{job.logs || "(no output)"}</pre>
    </Page>
  );
}
