// A package's Deployment tab (contract 11): which version unpinned calls get, a running canary's
// split and observed figures, the history, and Promote / Roll back for those the server allows.
import { useState } from "react";
import type { PackageDeploymentQuery as Deployment } from "../gql/graphql";
import { request } from "../lib/api";
import { when } from "../lib/format";
import { useAsync } from "../lib/hooks";
import { PackageDeploymentQuery, PromotePackageVersionMutation, RollbackPackageMutation } from "./DeploymentTab.graphql";
import { CanaryChart, type CanaryFigures } from "./CanaryChart";
import { ErrorBox, Loading } from "./Status";

type State = Deployment["packageDeployment"];

function numbers(value: unknown): Record<string, number> {
  if (!value || typeof value !== "object") return {};
  return Object.fromEntries(Object.entries(value as Record<string, unknown>).filter((e): e is [string, number] => typeof e[1] === "number"));
}

function maybe(value: unknown): number | null {
  return typeof value === "number" ? value : null;
}

/** The JSON fields of the state as the chart draws them (no rule decided here). */
export function figuresOf(state: State): CanaryFigures | null {
  if (state.state !== "canary" || !state.observed || typeof state.observed !== "object") return null;
  const observed = state.observed as Record<string, unknown>;
  const criteria = (state.criteria ?? {}) as Record<string, unknown>;
  return {
    split: numbers(state.trafficSplit),
    routed: numbers(observed.routed),
    jobs: maybe(observed.jobs) ?? 0,
    failed: maybe(observed.failed) ?? 0,
    errorRate: maybe(observed.error_rate),
    latencyP95Ms: maybe(observed.latency_p95_ms),
    errorRateMax: maybe(criteria.error_rate_max),
    latencyP95MaxMs: maybe(criteria.latency_p95_max_ms),
  };
}

export function DeploymentTab({ pkg }: { pkg: string }) {
  const { data, error, reload } = useAsync(() => request(PackageDeploymentQuery, { package: pkg }), pkg);
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  if (error) return <ErrorBox error={error} />;
  if (!data) return <Loading />;
  const state = data.packageDeployment;
  const act = (question: string, work: () => Promise<unknown>) => {
    if (!window.confirm(question)) return;
    setBusy(true);
    setProblem(null);
    work()
      .then(() => reload())
      .catch((e: unknown) => setProblem(e instanceof Error ? e.message : String(e)))
      .finally(() => setBusy(false));
  };
  const figures = figuresOf(state);
  return (
    <section aria-labelledby="deployment-heading">
      <h2 id="deployment-heading">Deployment</h2>
      <dl className="facts">
        <dt>Strategy</dt><dd>{state.strategy}</dd>
        <dt>State</dt><dd><span className={`badge deploy-${state.state}`}>{state.state.replace("_", " ")}</span></dd>
        <dt>Current</dt><dd>{state.current ?? "—"}</dd>
        <dt>Candidate</dt><dd>{state.candidate ?? "—"}</dd>
        {state.startedAt && <><dt>Canary started</dt><dd>{when(state.startedAt)}</dd></>}
        {state.endsAt && <><dt>Judged at</dt><dd>{when(state.endsAt)}</dd></>}
      </dl>
      {state.viewerMayDecide && (
        <p className="deploy-actions">
          {state.candidate && (
            <button type="button" disabled={busy} onClick={() => act(`Make ${state.candidate} current for every unpinned call?`, () => request(PromotePackageVersionMutation, { package: pkg, version: state.candidate ?? "" }))}>
              Promote {state.candidate}
            </button>
          )}{" "}
          <button type="button" disabled={busy} onClick={() => act(state.state === "canary" ? `End the canary of ${state.candidate} and keep ${state.current}?` : "Make the previous current version current again?", () => request(RollbackPackageMutation, { package: pkg }))}>
            Roll back
          </button>
          {problem && <span role="alert" className="problem"> {problem}</span>}
        </p>
      )}
      {figures && <CanaryChart figures={figures} candidate={state.candidate ?? ""} />}
      <h3>History</h3>
      <table className="history">
        <thead><tr><th scope="col">When</th><th scope="col">Version</th><th scope="col">Action</th><th scope="col">Why</th></tr></thead>
        <tbody>
          {[...state.history].reverse().map((h, i) => (
            <tr key={i}><td>{when(h.at)}</td><td>{h.version}</td><td>{h.action.replace("_", " ")}</td><td>{h.reason}</td></tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
