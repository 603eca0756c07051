// First: a run page's read starts before the rest of the app is evaluated.
import "./lib/earlyRun";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { BrowserRouter } from "react-router";
import { QueryClientProvider } from "@tanstack/react-query";
import { App } from "./App";
import { invalidateOnMutations, queryClient } from "./lib/hooks";
import "./app.css";

const root = document.getElementById("root");
if (root) {
  invalidateOnMutations(queryClient);
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={queryClient}>
        <BrowserRouter basename="/ui">
          <App />
        </BrowserRouter>
      </QueryClientProvider>
    </StrictMode>,
  );
}
