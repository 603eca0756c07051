// GraphiQL served by calcgraph itself (contract 4b: no CDN). Queries carry the token of the
// person signed in to the web app in this tab (same origin, same sessionStorage); subscriptions go over graphql-ws.
import "./cspStyles";
import { createGraphiQLFetcher } from "@graphiql/toolkit";
import { GraphiQL } from "graphiql";
import "graphiql/setup-workers/vite";
import "graphiql/style.css";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { createClient } from "graphql-ws";
import { currentSession } from "./lib/auth";

const session = currentSession();
const authorization = session ? `Bearer ${session.accessToken}` : null;
const scheme = window.location.protocol === "https:" ? "wss" : "ws";
const fetcher = createGraphiQLFetcher({
  url: "/graphql",
  headers: authorization ? { Authorization: authorization } : undefined,
  wsClient: createClient({
    url: `${scheme}://${window.location.host}/graphql`,
    lazy: true,
    retryAttempts: 0,
    connectionParams: authorization ? { Authorization: authorization } : {},
  }),
});

const root = document.getElementById("graphiql");
if (root) {
  root.textContent = "";
  createRoot(root).render(
    <StrictMode>
      <GraphiQL
        fetcher={fetcher}
        defaultHeaders={authorization ? JSON.stringify({ Authorization: authorization }, null, 2) : undefined}
        defaultQuery={"# Signed in through the web app at /ui/, your token is sent with every request.\n{\n  me { username roles }\n}\n"}
      >
        <GraphiQL.Logo>
          <a href="/ui/" className="back-to-app" style={{ color: "inherit" }}>← calcgraph app</a>
        </GraphiQL.Logo>
      </GraphiQL>
    </StrictMode>,
  );
}
