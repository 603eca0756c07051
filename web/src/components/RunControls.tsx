// The run page's controls (contract 10): cancel, re-run from failure, run again.
import { useState } from "react";
import { useNavigate } from "react-router";
import { request } from "../lib/api";
import type { LiveRun as Run, RunState } from "../lib/liveRun";
import { CancelRunMutation, RerunRunMutation } from "./RunControls.graphql";

/** Cancel a run that is not over (after a confirmation); re-run a failed or cancelled one from
 * its failure; start another run of the workflow with the form filled with this run's inputs. */
export function RunControls({ run, terminal, slug, onChanged }: { run: Run; terminal: boolean; slug: string | undefined; onChanged: (state: RunState) => void }) {
  const navigate = useNavigate();
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);
  const act = (work: () => Promise<void>) => {
    setBusy(true);
    setProblem(null);
    work()
      .catch((e: unknown) => setProblem(e instanceof Error ? e.message : String(e)))
      .finally(() => setBusy(false));
  };
  const cancel = () => {
    if (!window.confirm(`Cancel run ${run.id.slice(0, 8)}? Its pending nodes are cancelled and its running jobs stopped.`)) return;
    act(async () => onChanged((await request(CancelRunMutation, { id: run.id })).cancelRun));
  };
  const rerun = () =>
    act(async () => {
      const next = await request(RerunRunMutation, { id: run.id, from: "failure" });
      await navigate(`/runs/${next.rerunRun.id}`);
    });
  return (
    <span className="run-controls">
      {!terminal && <button type="button" disabled={busy} onClick={cancel}>Cancel</button>}
      {(run.status === "failed" || run.status === "cancelled") && (
        <button type="button" disabled={busy} onClick={rerun} title="A new run that reuses the nodes that succeeded">Re-run from failure</button>
      )}
      {terminal && slug && (
        <button type="button" disabled={busy} onClick={() => void navigate(`/workflows/${slug}/run`, { state: { inputs: run.inputs as unknown } })} title="The start form, filled with this run's inputs">Run again</button>
      )}
      {problem && <span role="alert" className="problem">{problem}</span>}
    </span>
  );
}
