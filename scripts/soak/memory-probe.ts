// Loaded into a node process with --import (scripts/soak/controller-memory.ts): every
// SLBX_MEMORY_PROBE_MS (default 5000) one JSON line appended to SLBX_MEMORY_PROBE_OUT with
// process.memoryUsage() and the size of V8's heap spaces (new, old, code, large objects). Inactive
// without SLBX_MEMORY_PROBE_OUT; never forces a garbage collection (that would change what it measures).
import { appendFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';

export interface MemorySample {
  /** Epoch milliseconds. */
  t: number;
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  /** Committed size of each V8 heap space, bytes: new, old, code, large_object, ... */
  spaces: Record<string, number>;
}

export function memorySample(): MemorySample {
  const m = process.memoryUsage();
  const spaces: Record<string, number> = {};
  for (const s of getHeapSpaceStatistics()) spaces[s.space_name.replace(/_space$/, '')] = s.space_size;
  return {
    t: Date.now(),
    rss: m.rss,
    heapTotal: m.heapTotal,
    heapUsed: m.heapUsed,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    spaces,
  };
}

const out = process.env['SLBX_MEMORY_PROBE_OUT'];
if (out !== undefined && out !== '') {
  const ms = Number(process.env['SLBX_MEMORY_PROBE_MS'] ?? 5000);
  const timer = setInterval(() => appendFileSync(out, `${JSON.stringify(memorySample())}\n`), Number.isFinite(ms) && ms >= 100 ? ms : 5000);
  timer.unref();
}
