// The entry: the run page's first read (lib/earlyRun) and the styles, then the app (boot.tsx)
// as a chunk of its own. A module script runs once all its static imports are fetched and
// evaluated: with the app imported statically, a 1,000-node run's read went out only after the
// whole app (React DOM, React Flow, dagre, every page) was parsed; now it goes out first and the
// server answers while the app loads.
import "./lib/earlyRun";
import "./app.css";

void import("./boot");
