// Imported first by main.tsx, the app's entry: at a run's address the run page's first read goes
// out before the rest of the app (boot.tsx, a chunk of its own) is fetched, evaluated and its
// first page drawn (lib/liveRun).
import { readRunEarly } from "./liveRun";

readRunEarly(location.pathname);
