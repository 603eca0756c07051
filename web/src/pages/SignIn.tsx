import { useEffect, useRef, useState } from "react";
import { useNavigate, useSearchParams } from "react-router";
import { completeSignIn, currentSession, startSignIn } from "../lib/auth";

export function SignInPage() {
  const [params] = useSearchParams();
  const [error, setError] = useState<string | null>(null);
  const next = params.get("next") ?? "/ui/workflows";
  const session = currentSession();
  return (
    <section className="signin">
      <h1>Sign in</h1>
      {params.get("expired") && (
        <p role="status">Your session has ended. Sign in again to continue; what you were editing is kept.</p>
      )}
      {session && <p>Signed in as {session.username}.</p>}
      <button
        type="button"
        onClick={() => {
          const target = next.startsWith("/ui/") ? next : `/ui${next}`;
          startSignIn(target).catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)));
        }}
      >
        Sign in with your organisation
      </button>
      {error && <p role="alert" className="problem">{error}</p>}
    </section>
  );
}

export function CallbackPage() {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const [error, setError] = useState<string | null>(null);
  const started = useRef(false);
  useEffect(() => {
    if (started.current) return; // StrictMode runs effects twice; a code is good only once
    started.current = true;
    const code = params.get("code");
    const state = params.get("state") ?? "";
    if (!code) {
      setError(params.get("error_description") ?? params.get("error") ?? "no authorization code arrived");
      return;
    }
    completeSignIn(code, state).then(
      (returnTo) => navigate(returnTo.replace(/^\/ui/, "") || "/", { replace: true }),
      (e: unknown) => setError(e instanceof Error ? e.message : String(e)),
    );
  }, [params, navigate]);
  return (
    <section className="signin">
      <h1>Signing in…</h1>
      {error && <p role="alert" className="problem">Sign-in failed: {error}</p>}
    </section>
  );
}
