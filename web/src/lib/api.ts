// A small typed GraphQL client: operation types come from codegen (TypedDocumentString), queries
// go over fetch, `runUpdates` over graphql-ws (graphql-transport-ws, token in connection_init).
import { createClient, type Client } from "graphql-ws";
import type { TypedDocumentString } from "../gql/graphql";
import { currentSession, sessionExpired, sessionHasExpired } from "./auth";

export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
    readonly extensions: Record<string, unknown> = {},
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
  return send(document, {}, null);
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
  if (sessionHasExpired()) {
    // Back to the sign-in before sending: the page comes back with its drafts.
    sessionExpired();
    throw new ApiError("your session has ended: signing in again", "Unauthenticated");
  }
  const answer = await send(document, variables ?? {}, currentSession()?.accessToken ?? null);
  if (isMutation(document.toString())) for (const listener of mutationListeners) listener();
  return answer;
}

async function send<TResult, TVariables>(
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
  };
  const first = payload.errors?.[0];
  if (first) {
    const code = typeof first.extensions?.code === "string" ? first.extensions.code : null;
    if (code === "Unauthenticated") {
      sessionExpired();
    }
    throw new ApiError(first.message, code, first.extensions ?? {});
  }
  if (!response.ok || !payload.data) {
    throw new ApiError(payload.detail ?? `the server answered ${response.status}`, null);
  }
  return payload.data;
}

let wsClient: Client | null = null;

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
    });
  }
  return wsClient;
}

/** Subscribe over WebSocket. `onUnavailable` is called when the socket cannot be used at all
 * (a server without the WebSocket door), so the caller falls back to polling. */
export function subscribe<TResult, TVariables>(
  document: TypedDocumentString<TResult, TVariables>,
  variables: TVariables,
  handlers: {
    next: (data: TResult) => void;
    error: (error: ApiError) => void;
    unavailable: () => void;
    complete: () => void;
  },
): () => void {
  let received = false;
  return ws().subscribe<TResult>(
    { query: document.toString(), variables: variables as Record<string, unknown> },
    {
      next: (value) => {
        received = true;
        const first = value.errors?.[0];
        if (first) {
          const code = typeof first.extensions?.code === "string" ? first.extensions.code : null;
          handlers.error(new ApiError(first.message, code));
        } else if (value.data) {
          handlers.next(value.data);
        }
      },
      error: (error: unknown) => {
        // A CloseEvent 4401 means the token was refused; anything before the first message
        // means the door is not there: poll instead.
        const closeCode = (error as { code?: number } | null)?.code;
        if (closeCode === 4401) {
          sessionExpired();
          return;
        }
        if (!received) handlers.unavailable();
        else handlers.error(new ApiError("the live connection was lost", null));
      },
      complete: handlers.complete,
    },
  );
}
