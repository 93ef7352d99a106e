// What a data plane's counters say about one frame (the fuzz suites): a DROP bumps exactly one drop
// counter, by one, the one lastDrop names (set for this frame), never the catch-all internal_error; any
// other verdict bumps no drop counter and leaves lastDrop at -1.
//
// Run per frame, 100,000 times a suite: the checks are plain comparisons over the drop counters' indexes
// (computed once per counter list). expect() per frame and a filter over every counter name per frame
// (325 on the host agent) took most of the run, 30 s on a loaded machine; expect() now runs only for a
// frame that broke a rule, to say which one and with what, as it did for every frame before.
import { expect } from 'vitest';

export interface JudgedContext {
  lastDrop: number;
  counters: { names: readonly string[]; values: Float64Array };
}

/** A value lastDrop never holds: set before each frame, so a verdict must set lastDrop for THIS frame. */
export const STALE_DROP = 0x7fff;

export class DropJudge {
  private before = new Float64Array(0);
  private names: readonly string[] | null = null;
  private drops: number[] = [];

  /** Before the frame: remembers the counters and makes lastDrop stale. */
  start(ctx: JudgedContext): void {
    const { names, values } = ctx.counters;
    if (names !== this.names) {
      this.names = names;
      this.drops = names.flatMap((n, i) => (n.startsWith('drop_') ? [i] : []));
    }
    if (this.before.length !== values.length) this.before = new Float64Array(values.length);
    this.before.set(values);
    ctx.lastDrop = STALE_DROP;
  }

  /** After the frame: its drop reason (a counter name) or null; throws (an expect() failure) when a rule is broken. */
  finish(ctx: JudgedContext, isDrop: boolean, verdict: number): string | null {
    const { names, values } = ctx.counters;
    const before = this.before;
    let movedCount = 0;
    let movedAt = -1;
    for (const i of this.drops)
      if (values[i] !== before[i]) {
        movedCount++;
        movedAt = i;
      }
    const name = names[ctx.lastDrop];
    const fine = isDrop
      ? name !== undefined &&
        name.startsWith('drop_') &&
        name !== 'drop_internal_error' &&
        movedCount === 1 &&
        movedAt === ctx.lastDrop &&
        values[movedAt]! - before[movedAt]! === 1
      : movedCount === 0 && ctx.lastDrop === -1;
    if (fine) return isDrop ? name! : null;
    const moved = this.drops.filter((i) => values[i] !== before[i]).map((i) => names[i]!);
    if (!isDrop) {
      expect(moved, `verdict ${verdict} bumped drop counters`).toEqual([]);
      expect(ctx.lastDrop, `verdict ${verdict}: lastDrop`).toBe(-1);
    } else {
      expect(name, `lastDrop ${ctx.lastDrop} after a DROP`).toMatch(/^drop_/);
      expect(name).not.toBe('drop_internal_error');
      expect(moved, `DROP named ${name}`).toEqual([name]);
      expect(values[ctx.lastDrop]! - before[ctx.lastDrop]!, `${name} bumped by`).toBe(1);
    }
    throw new Error(`verdict ${verdict}, lastDrop ${ctx.lastDrop}: judged wrong, but no assertion said why`);
  }
}
