// The controller's scheduled full garbage collection (controller/memory.ts; docs/controller.md, Memory):
// the collection it runs is V8's real full collection, seen from outside by a WeakRef whose target is
// unreachable (V8 clears it only when it collects that object), and the schedule calls it.
import { describe, expect, it } from 'vitest';
import { collectEvery, fullCollection } from '../controller/memory.js';

/** A WeakRef to an object nothing else holds, made in its own function (no local keeps it). */
function orphan(): WeakRef<object> {
  return new WeakRef({ payload: new Array(100_000).fill(7) });
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('the controller full collection', () => {
  it('collects an unreachable object', async () => {
    const gc = fullCollection();
    const w = orphan();
    await tick(); // a WeakRef's target stays alive until the job that made it ends
    gc();
    expect(w.deref()).toBeUndefined();
  });

  it('runs on its schedule, and not at all with 0', async () => {
    const times: number[] = [];
    const stop = collectEvery(1, (ms) => times.push(ms));
    const none = collectEvery(0, () => times.push(-1));
    const w = orphan();
    await tick();
    for (let i = 0; i < 200 && times.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    stop();
    none();
    expect(times.length).toBeGreaterThan(0);
    expect(times.every((t) => t >= 0)).toBe(true);
    expect(w.deref()).toBeUndefined();
  });
});
