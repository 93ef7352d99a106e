// Loaded into a node process with --import (scripts/soak/controller-memory.ts): every
// SLBX_MEMORY_PROBE_MS (default 5000) one JSON line appended to SLBX_MEMORY_PROBE_OUT with
// process.memoryUsage() and the size of V8's heap spaces (new, old, code, large objects). Inactive
// without SLBX_MEMORY_PROBE_OUT; never forces a garbage collection (that would change what it measures).
import { appendFileSync, readFileSync } from 'node:fs';
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
  /**
   * Resident bytes of the process's mappings by kind (/proc/self/smaps, when SLBX_MEMORY_PROBE_SMAPS=1):
   * 'heap' (malloc's main arena, [heap]), 'stack', 'anon' (unnamed anonymous mappings: V8's heap pages,
   * other threads' malloc arenas, thread stacks), 'file' (the node binary and libraries), 'other'.
   */
  maps?: Record<string, number>;
  /** Resident bytes of each unnamed anonymous mapping, by start address (hex), when SLBX_MEMORY_PROBE_SMAPS=1. */
  anon?: Record<string, number>;
}

/** Resident bytes per kind of mapping and per anonymous mapping, from the text of /proc/PID/smaps. */
export function smapsByKind(text: string): { maps: Record<string, number>; anon: Record<string, number> } {
  const maps: Record<string, number> = { heap: 0, stack: 0, anon: 0, file: 0, other: 0 };
  const anon: Record<string, number> = {};
  let kind = 'other';
  let start = '';
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head !== null) {
      start = head[1]!;
      const name = head[2]!.trim();
      kind = name === '' ? 'anon' : name === '[heap]' ? 'heap' : name === '[stack]' ? 'stack' : name.startsWith('/') ? 'file' : 'other';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss !== null) {
      const b = Number(rss[1]) * 1024;
      maps[kind] = (maps[kind] ?? 0) + b;
      if (kind === 'anon' && b > 0) anon[start] = b;
    }
  }
  return { maps, anon };
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
    ...(process.env['SLBX_MEMORY_PROBE_SMAPS'] === '1' ? smapsByKind(readFileSync('/proc/self/smaps', 'utf8')) : {}),
  };
}

const out = process.env['SLBX_MEMORY_PROBE_OUT'];
if (out !== undefined && out !== '') {
  const ms = Number(process.env['SLBX_MEMORY_PROBE_MS'] ?? 5000);
  const timer = setInterval(() => appendFileSync(out, `${JSON.stringify(memorySample())}\n`), Number.isFinite(ms) && ms >= 100 ? ms : 5000);
  timer.unref();
}
