// Sign-in with the authorization code flow and PKCE S256, through the server's /auth/login
// (which makes the verifier and the provider URL) and /auth/callback (which exchanges the code).
// The token lives in sessionStorage (contract 8b: no tokens in localStorage): it stays with this
// tab and ends with it, and GraphiQL, served by the same server and opened in the same tab, reads
// it from there too. Other tabs sign in on their own (the provider's session makes that one click).

const TOKEN_KEY = "calcgraph.session";
const LOGIN_KEY = "calcgraph.login";

export interface Session {
  accessToken: string;
  expiresAt: number; // epoch ms
  username: string;
  roles: string[];
}

interface PendingLogin {
  state: string;
  codeVerifier: string;
  returnTo: string;
}

// Versions before contract 8b kept the token in localStorage: drop any left there.
try {
  localStorage.removeItem(TOKEN_KEY);
} catch {
  // storage disabled: nothing can be left there either
}

function storedSession(): Session | null {
  const raw = sessionStorage.getItem(TOKEN_KEY);
  if (!raw) return null;
  try {
    return JSON.parse(raw) as Session;
  } catch {
    return null;
  }
}

// A token this close to its end is treated as ended: a request must not race its expiry.
const MARGIN_MS = 5_000;

export function currentSession(): Session | null {
  const session = storedSession();
  return session && session.expiresAt - MARGIN_MS > Date.now() ? session : null;
}

/** A session was there and has run out (as opposed to nobody having signed in). */
export function sessionHasExpired(): boolean {
  const session = storedSession();
  return session !== null && session.expiresAt - MARGIN_MS <= Date.now();
}

export function signOut(): void {
  sessionStorage.removeItem(TOKEN_KEY);
}

async function postJson<T>(path: string, body?: unknown): Promise<T> {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const payload = (await response.json().catch(() => ({}))) as { detail?: string } & T;
  if (!response.ok) throw new Error(payload.detail ?? `${path} answered ${response.status}`);
  return payload;
}

/** Go to the identity provider; come back to `returnTo` once signed in. */
export async function startSignIn(returnTo: string): Promise<void> {
  const start = await postJson<{ authorization_url: string; code_verifier: string; state: string }>(
    "/auth/login",
  );
  const pending: PendingLogin = { state: start.state, codeVerifier: start.code_verifier, returnTo };
  sessionStorage.setItem(LOGIN_KEY, JSON.stringify(pending));
  window.location.assign(start.authorization_url);
}

/** Finish the sign-in from the provider's redirect; returns where to go next. */
export async function completeSignIn(code: string, state: string): Promise<string> {
  const raw = sessionStorage.getItem(LOGIN_KEY);
  const pending = raw ? (JSON.parse(raw) as PendingLogin) : null;
  if (!pending || pending.state !== state) {
    throw new Error("this sign-in was not started here (state mismatch): sign in again");
  }
  sessionStorage.removeItem(LOGIN_KEY);
  const result = await postJson<{
    access_token: string;
    expires_in: number | null;
    user: { username: string; roles: string[] };
  }>("/auth/callback", { code, code_verifier: pending.codeVerifier });
  const session: Session = {
    accessToken: result.access_token,
    expiresAt: Date.now() + (result.expires_in ?? 300) * 1000,
    username: result.user.username,
    roles: result.user.roles,
  };
  sessionStorage.setItem(TOKEN_KEY, JSON.stringify(session));
  return pending.returnTo;
}

/** The token is no longer accepted: sign in again and come back to the same page. Drafts are
 * in sessionStorage, so the page finds what the person was typing. */
export function sessionExpired(): void {
  if (/^\/ui\/(signin|callback)/.test(window.location.pathname)) return;
  signOut();
  const here = window.location.pathname + window.location.search;
  window.location.assign(`/ui/signin?expired=1&next=${encodeURIComponent(here)}`);
}
