// The data layer: every page reads through `useAsync`, which keeps answers in one TanStack
// Query cache (docs/architecture.md, "Web app"): an answer is shown again at once when a page
// comes back to its key (stale-while-revalidate: refetched in the background), refetched when
// the window regains focus, and every mutation the app sends marks the whole cache stale
// (active pages refetch), so no page shows what a save or a publish changed.
import { useCallback, useState } from "react";
import { QueryClient, useQuery } from "@tanstack/react-query";
import { onMutation } from "./api";

export function newQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        staleTime: 0, // cached answers are shown, then refetched: stale-while-revalidate
        gcTime: 10 * 60_000,
        refetchOnWindowFocus: true,
        retry: false, // the server's refusals are answers, not transient faults
      },
    },
  });
}

export const queryClient = newQueryClient();

let unsubscribe: (() => void) | null = null;

/** Every successful mutation marks every cached answer stale (pages on screen refetch). */
export function invalidateOnMutations(client: QueryClient): () => void {
  unsubscribe?.();
  const stop = onMutation(() => void client.invalidateQueries());
  unsubscribe = stop;
  return stop;
}

export interface Async<T> {
  data: T | null;
  error: Error | null;
  /** No answer for this key yet (a cached one shows at once while it is refetched). */
  loading: boolean;
  /** An answer is shown and a newer one is being fetched. */
  refreshing: boolean;
  reload: () => void;
}

/** The answer of `load`, cached under `key`. The key names the data for the whole app: two
 * pages with the same key share the answer, so it says what it is (`job:<id>`, `workflow:<slug>`)
 * and holds every variable of the load. */
export function useAsync<T>(load: () => Promise<T>, key: string): Async<T> {
  const query = useQuery<T, Error>({ queryKey: ["async", key], queryFn: load });
  const { refetch } = query;
  const reload = useCallback(() => void refetch(), [refetch]);
  return {
    data: query.data ?? null,
    error: query.error,
    loading: query.isPending,
    refreshing: query.isFetching && !query.isPending,
    reload,
  };
}

/** State kept in sessionStorage under `key`: a form survives a sign-in round trip. */
export function useSessionState<T>(key: string, initial: () => T): [T, (next: T) => void] {
  const [value, setValue] = useState<T>(() => {
    const raw = sessionStorage.getItem(key);
    if (raw !== null) {
      try {
        return JSON.parse(raw) as T;
      } catch {
        /* a draft from an older app: start afresh */
      }
    }
    return initial();
  });
  const set = useCallback(
    (next: T) => {
      sessionStorage.setItem(key, JSON.stringify(next));
      setValue(next);
    },
    [key],
  );
  return [value, set];
}
