import { useEffect, useState, type ReactNode } from "react";
import { Link, NavLink, Navigate, Route, Routes, useLocation, useNavigate } from "react-router";
import { publicRequest } from "./lib/api";
import { currentSession, sessionHasExpired, signOut } from "./lib/auth";
import { CatalogContext } from "./lib/catalog";
import { catalogFrom, type Catalog } from "./lib/typeexpr";
import { TypesQuery } from "./App.graphql";
import { CallbackPage, SignInPage } from "./pages/SignIn";
import { PackagePage, PackagesPage } from "./pages/Packages";
import { FunctionPage, FunctionsPage } from "./pages/Functions";
import { WorkflowsPage, StartRunPage } from "./pages/Workflows";
import { EditorPage } from "./pages/Editor";
import { RunPage } from "./pages/Run";
import { RunsPage } from "./pages/Runs";
import { JobPage, JobsPage } from "./pages/Jobs";
import { NewWorkflowPage } from "./pages/NewWorkflow";
import { OrganizationPage, OrganizationsPage } from "./pages/Organizations";
import { PublishFunctionPage, PublishPackagePage } from "./pages/Publish";
import { WebhookDeliveriesPage, WebhooksPage } from "./pages/Webhooks";
import { Notifications } from "./components/Notifications";

function RequireSession({ children }: { children: ReactNode }) {
  const location = useLocation();
  if (!currentSession()) {
    const next = encodeURIComponent(location.pathname + location.search);
    const expired = sessionHasExpired() ? "expired=1&" : "";
    return <Navigate to={`/signin?${expired}next=${next}`} replace />;
  }
  return <>{children}</>;
}

function Layout({ children }: { children: ReactNode }) {
  const session = currentSession();
  const navigate = useNavigate();
  return (
    <div className="layout">
      <header>
        <Link to="/" className="brand">calcgraph</Link>
        <nav aria-label="Main">
          <NavLink to="/workflows">Workflows</NavLink>
          <NavLink to="/runs">Runs</NavLink>
          <NavLink to="/packages">Packages</NavLink>
          <NavLink to="/functions">Functions</NavLink>
          <NavLink to="/jobs">Jobs</NavLink>
          <NavLink to="/organizations">Organizations</NavLink>
          <NavLink to="/webhooks">Webhooks</NavLink>
          <a href="/graphql">GraphiQL</a>
        </nav>
        <div className="user">
          {session ? (
            <>
              <Notifications key={session.username} username={session.username} />
              <span aria-label="Signed in as">{session.username}</span>
              <button
                type="button"
                onClick={() => {
                  signOut();
                  navigate("/signin");
                }}
              >
                Sign out
              </button>
            </>
          ) : (
            <Link to="/signin">Sign in</Link>
          )}
        </div>
      </header>
      <main>{children}</main>
    </div>
  );
}

function Home() {
  return <Navigate to="/workflows" replace />;
}

export function App() {
  const [catalog, setCatalog] = useState<Catalog>(new Map());
  useEffect(() => {
    // The catalog is public: forms use it for units, shapes and composites.
    publicRequest(TypesQuery).then(
      (data) => setCatalog(catalogFrom(data.types)),
      () => setCatalog(new Map()),
    );
  }, []);
  const guarded = (page: ReactNode) => <RequireSession>{page}</RequireSession>;
  return (
    <CatalogContext.Provider value={catalog}>
      <Layout>
        <Routes>
          <Route path="/signin" element={<SignInPage />} />
          <Route path="/callback" element={<CallbackPage />} />
          <Route path="/" element={guarded(<Home />)} />
          <Route path="/packages" element={guarded(<PackagesPage />)} />
          <Route path="/packages/:id" element={guarded(<PackagePage />)} />
          <Route path="/functions" element={guarded(<FunctionsPage />)} />
          <Route path="/functions/:id" element={guarded(<FunctionPage />)} />
          <Route path="/workflows" element={guarded(<WorkflowsPage />)} />
          <Route path="/workflows/new" element={guarded(<NewWorkflowPage />)} />
          <Route path="/organizations" element={guarded(<OrganizationsPage />)} />
          <Route path="/organizations/:slug" element={guarded(<OrganizationPage />)} />
          <Route path="/workflows/:slug" element={guarded(<EditorPage />)} />
          <Route path="/workflows/:slug/run" element={guarded(<StartRunPage />)} />
          <Route path="/publish" element={guarded(<PublishPackagePage />)} />
          <Route path="/publish/function" element={guarded(<PublishFunctionPage />)} />
          <Route path="/runs" element={guarded(<RunsPage />)} />
          <Route path="/runs/:id" element={guarded(<RunPage />)} />
          <Route path="/jobs" element={guarded(<JobsPage />)} />
          <Route path="/jobs/:id" element={guarded(<JobPage />)} />
          <Route path="/webhooks" element={guarded(<WebhooksPage />)} />
          <Route path="/webhooks/:id" element={guarded(<WebhookDeliveriesPage />)} />
          <Route path="*" element={<p>No page here. <Link to="/">Start over</Link></p>} />
        </Routes>
      </Layout>
    </CatalogContext.Provider>
  );
}
