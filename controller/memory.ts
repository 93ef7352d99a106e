// The controller's memory (docs/controller.md, Memory): a full garbage collection at a fixed interval.
//
// At the controller's usual rate (a few agents' heartbeats and watches, a change now and then) little
// survives a scavenge, so V8's old space fills slowly and V8 waits for it to reach its limit before
// its first full (mark-compact) collection: for much more than an hour in the lab. Meanwhile the old
// space holds garbage, and the garbage holds memory outside V8's heap (the buffers of finished requests
// and sockets, freed to malloc only when their JavaScript objects are collected): the resident memory
// climbs with wall time though nothing live grows (docs/soak.md, "The controller's memory"). One full
// collection every interval frees both; on the controller's heap (about 10 MB) it takes milliseconds.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export const GC_INTERVAL_S = 60;

/** V8's full collection: global.gc when node runs with --expose-gc, else exposed now (a V8 flag set at run time, as node's own docs show). */
export function fullCollection(): () => void {
  const g = (globalThis as { gc?: unknown }).gc;
  if (typeof g === 'function') return g as () => void;
  setFlagsFromString('--expose-gc');
  const f = runInNewContext('gc') as unknown;
  if (typeof f !== 'function') throw new Error('V8 did not expose gc');
  return f as () => void;
}

/** Runs a full collection every `intervalS` seconds (0: never); the timer does not keep the process alive. Returns the stop. */
export function collectEvery(intervalS: number, onDone?: (ms: number) => void): () => void {
  if (intervalS <= 0) return () => {};
  const gc = fullCollection();
  const t = setInterval(() => {
    const t0 = performance.now();
    gc();
    onDone?.(performance.now() - t0);
  }, intervalS * 1000);
  t.unref();
  return () => clearInterval(t);
}
