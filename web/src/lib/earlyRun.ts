// Imported first by main.tsx: at a run's address the run page's first read goes out before the
// rest of the app's modules are evaluated and its first page is drawn (lib/liveRun).
import { readRunEarly } from "./liveRun";

readRunEarly(location.pathname);
