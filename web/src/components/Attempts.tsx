// A retried node's attempts (contract 10): each earlier attempt with its job and the error it
// failed with, then the current one; the node's next attempt time while it waits to retry.
import { Link } from "react-router";
import { duration, when } from "../lib/format";

export interface AttemptJob {
  id: string;
  createdAt: string;
  finishedAt?: string | null;
}

interface Attempt {
  attempt: number;
  job_id: string | null;
  error: { kind?: string; message?: string } | null;
}

/** The `attempts` JSON of a node state, as the server lists it: `[{attempt, job_id, error}]`. */
export function attemptsOf(value: unknown): Attempt[] {
  if (!Array.isArray(value)) return [];
  return value.filter((a): a is Attempt => !!a && typeof a === "object" && typeof (a as Attempt).attempt === "number");
}

/** The earlier attempts' jobs with their attempt numbers, oldest first (the Timeline's bars). */
export function earlierAttempts(state: { attempts: unknown; attemptJobs: readonly AttemptJob[] }): { attempt: number; createdAt: string; finishedAt?: string | null }[] {
  const jobs = new Map(state.attemptJobs.map((j) => [j.id, j]));
  return attemptsOf(state.attempts).flatMap((a) => {
    const job = a.job_id ? jobs.get(a.job_id) : undefined;
    return job ? [{ attempt: a.attempt, createdAt: job.createdAt, finishedAt: job.finishedAt }] : [];
  });
}

function errorText(error: Attempt["error"]): string {
  if (!error) return "—";
  const kind = (error.kind ?? "error").replace(/_/g, " ");
  return error.message ? `${kind}: ${error.message}` : kind;
}

export function Attempts({ attempts, jobs, current, retryAt }: {
  attempts: unknown;
  jobs: readonly AttemptJob[];
  current: { attempt: number; jobId: string | null | undefined; status: string };
  retryAt: string | null | undefined;
}) {
  const earlier = attemptsOf(attempts);
  if (earlier.length === 0 && !retryAt) return null;
  const byId = new Map(jobs.map((j) => [j.id, j]));
  return (
    <table className="attempts">
      <caption>Attempts{retryAt ? ` (next at ${when(retryAt)})` : ""}</caption>
      <thead><tr><th scope="col">Attempt</th><th scope="col">Job</th><th scope="col">Took</th><th scope="col">Error</th></tr></thead>
      <tbody>
        {earlier.map((a) => {
          const job = a.job_id ? byId.get(a.job_id) : undefined;
          return (
            <tr key={a.attempt}>
              <th scope="row">{a.attempt}</th>
              <td>{a.job_id ? <Link to={`/jobs/${a.job_id}`}>{a.job_id.slice(0, 8)}</Link> : "—"}</td>
              <td>{job ? duration(job.createdAt, job.finishedAt) : "—"}</td>
              <td className="error-message">{errorText(a.error)}</td>
            </tr>
          );
        })}
        {current.jobId && (
          <tr>
            <th scope="row">{current.attempt}</th>
            <td><Link to={`/jobs/${current.jobId}`}>{current.jobId.slice(0, 8)}</Link></td>
            <td colSpan={2}>{current.status}</td>
          </tr>
        )}
      </tbody>
    </table>
  );
}
