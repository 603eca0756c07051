// The boxes and links a layout places (lib/layout), and a box's height: no dependency, so the
// run page's first read (lib/runLayout) sizes its boxes without loading dagre.
export interface Box {
  id: string;
  width: number;
  height: number;
}

export interface Link {
  source: string;
  target: string;
}

/** The height a node box takes for its ports (FlowNode's CSS: 22 px a port row). */
export function boxHeight(portRows: number, compact = false): number {
  return compact ? 44 : 58 + 22 * portRows;
}
