// A small typed GraphQL client: operation types come from codegen (TypedDocumentString), queries
// go over fetch, subscriptions over graphql-ws (graphql-transport-ws, token in connection_init).
import { createClient, type Client } from "graphql-ws";
import type { TypedDocumentString } from "../gql/graphql";
import { currentSession, sessionExpired, sessionHasExpired } from "./auth";
import { retryAfterSeconds } from "./retryAfter";
import { retryDelay } from "./retryPolicy";

export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
    readonly extensions: Record<string, unknown> = {},
    /** Seconds the server asked us to wait before trying again (an overload, a rate limit). */
    readonly retryAfter: number | null = null,
    /** The HTTP status of the answer, when there was one. */
    readonly status: number | null = null,
  ) {
    super(message);
  }
}

interface GraphQLResponse<T> {
  data?: T | null;
  errors?: { message: string; extensions?: Record<string, unknown> }[];
}

/** A public query (the type catalog): no token, so it works before and between sign-ins. */
export async function publicRequest<TResult>(
  document: TypedDocumentString<TResult, Record<string, never>>,
): Promise<TResult> {
  return send(document, {}, null, { mutation: false });
}

const mutationListeners = new Set<() => void>();

/** `listener` runs after every mutation the server accepted (the query cache marks its answers
 * stale: lib/hooks). Returns the function that removes it. */
export function onMutation(listener: () => void): () => void {
  mutationListeners.add(listener);
  return () => mutationListeners.delete(listener);
}

function isMutation(text: string): boolean {
  return /^\s*mutation\b/.test(text.replace(/^\s*(#[^\n]*\n\s*)*/, ""));
}

export async function request<TResult, TVariables>(
  document: TypedDocumentString<TResult, TVariables>,
  ...[variables]: TVariables extends Record<string, never> ? [] : [TVariables]
): Promise<TResult> {
  return authorised(document, variables, true);
}

/** `request`, but a refusal that names a wait is thrown at once (its `retryAfter` set): for a
 * caller that shows the wait and keeps its own schedule, as the run page's ticker does. */
export async function requestOnce<TResult, TVariables>(
  document: TypedDocumentString<TResult, TVariables>,
  ...[variables]: TVariables extends Record<string, never> ? [] : [TVariables]
): Promise<TResult> {
  return authorised(document, variables, false);
}

async function authorised<TResult, TVariables>(
  document: TypedDocumentString<TResult, TVariables>,
  variables: TVariables | undefined,
  waitOut: boolean,
): Promise<TResult> {
  if (sessionHasExpired()) {
    // Back to the sign-in before sending: the page comes back with its drafts.
    sessionExpired();
    throw new ApiError("your session has ended: signing in again", "Unauthenticated");
  }
  const mutation = isMutation(document.toString());
  const answer = await send(document, variables ?? {}, currentSession()?.accessToken ?? null, waitOut ? { mutation } : null);
  if (mutation) for (const listener of mutationListeners) listener();
  return answer;
}

/** One request, tried again when the server asks for a short wait (lib/retryPolicy); `retry`
 * null: never (the caller shows the wait and waits it out itself: the run page's ticks). */
async function send<TResult, TVariables>(
  document: TypedDocumentString<TResult, TVariables>,
  variables: unknown,
  token: string | null,
  retry: { mutation: boolean } | null,
): Promise<TResult> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await sendOnce(document, variables, token);
    } catch (e) {
      if (!(e instanceof ApiError) || retry === null) throw e;
      const wait = retryDelay({ status: e.status ?? 0, code: e.code, retryAfter: e.retryAfter, mutation: retry.mutation }, attempt);
      if (wait === null) throw e;
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    }
  }
}

async function sendOnce<TResult, TVariables>(
  document: TypedDocumentString<TResult, TVariables>,
  variables: unknown,
  token: string | null,
): Promise<TResult> {
  const headers: Record<string, string> = {
    "Content-Type": "application/json",
    Accept: "application/graphql-response+json, application/json",
  };
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch("/graphql", {
    method: "POST",
    headers,
    body: JSON.stringify({ query: document.toString(), variables }),
  });
  if (response.status === 401) {
    sessionExpired();
    throw new ApiError("your session has ended: signing in again", "Unauthenticated");
  }
  const payload = (await response.json().catch(() => ({}))) as GraphQLResponse<TResult> & {
    detail?: string;
    retry_after?: unknown;
  };
  const first = payload.errors?.[0];
  if (first) {
    const code = typeof first.extensions?.code === "string" ? first.extensions.code : null;
    if (code === "Unauthenticated") {
      sessionExpired();
    }
    const wait = retryAfterSeconds(response.headers.get("Retry-After"), first.extensions);
    throw new ApiError(first.message, code, first.extensions ?? {}, wait, response.status);
  }
  if (!response.ok || !payload.data) {
    const wait = retryAfterSeconds(response.headers.get("Retry-After"), { retry_after: payload.retry_after });
    const kind = /^([A-Za-z]+): /.exec(payload.detail ?? "")?.[1] ?? null;
    throw new ApiError(payload.detail ?? `the server answered ${response.status}`, kind, {}, wait, response.status);
  }
  return payload.data;
}

let wsClient: Client | null = null;
let socketOpen = false;
const openListeners = new Set<() => void>();

function ws(): Client {
  if (!wsClient) {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    wsClient = createClient({
      url: `${scheme}://${window.location.host}/graphql`,
      lazy: true,
      retryAttempts: 0,
      connectionParams: () => {
        const session = currentSession();
        return session ? { Authorization: `Bearer ${session.accessToken}` } : {};
      },
      on: {
        connected: () => {
          socketOpen = true;
          for (const listener of [...openListeners]) listener();
        },
        closed: () => {
          socketOpen = false;
        },
      },
    });
  }
  return wsClient;
}

/** Subscribe over WebSocket. `connected` is called once the socket is acknowledged (at once if
 * it already is); `lost` when the socket cannot be used or is gone (no server door, a blocked
 * or dropped connection), so the caller falls back to polling; `error` for an error answer. */
export function subscribe<TResult, TVariables>(
  document: TypedDocumentString<TResult, TVariables>,
  variables: TVariables,
  handlers: {
    next: (data: TResult) => void;
    error: (error: ApiError) => void;
    lost: () => void;
    complete: () => void;
    connected?: () => void;
  },
): () => void {
  let done = false;
  let disposed = false; // the caller unsubscribed: it hears nothing more
  const onOpen = () => {
    openListeners.delete(onOpen);
    if (!done) handlers.connected?.();
  };
  const client = ws();
  if (socketOpen) queueMicrotask(onOpen);
  else openListeners.add(onOpen);
  const unsubscribe = client.subscribe<TResult>(
    { query: document.toString(), variables: variables as Record<string, unknown> },
    {
      next: (value) => {
        if (disposed) return;
        const first = value.errors?.[0];
        if (first) {
          const code = typeof first.extensions?.code === "string" ? first.extensions.code : null;
          handlers.error(new ApiError(first.message, code));
        } else if (value.data) {
          handlers.next(value.data);
        }
      },
      error: (error: unknown) => {
        done = true;
        openListeners.delete(onOpen);
        if (disposed) return;
        // A CloseEvent 4401 means the token was refused: sign in again.
        const closeCode = (error as { code?: number } | null)?.code;
        if (closeCode === 4401) {
          sessionExpired();
          return;
        }
        handlers.lost();
      },
      complete: () => {
        done = true;
        openListeners.delete(onOpen);
        if (!disposed) handlers.complete();
      },
    },
  );
  return () => {
    done = true;
    disposed = true;
    openListeners.delete(onOpen);
    unsubscribe();
  };
}
