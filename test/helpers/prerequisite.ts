// Tests that need something this machine may lack (root, network namespaces, BIRD, tshark, the ring
// addon, a build). Such a test is never skipped silently: locally it is skipped with the reason, which
// the run's summary line lists (test/helpers/skip-summary.ts); under CI it fails with the reason.
import { spawnSync } from 'node:child_process';
import { it, type TestContext } from 'vitest';

/** True when $CI is set to anything but '', 'false' or '0' (.ci/run sets CI=true). */
export function isCI(): boolean {
  const v = process.env.CI;
  return v !== undefined && v !== '' && v !== 'false' && v !== '0';
}

/**
 * For a block that cannot run here (`why` is not null): registers, where it is called, one test named
 * after `what` that is skipped with `why` (or fails with it under CI), and returns true so that the
 * caller skips the block: `describe.skipIf(unmet(why, 'the namespace lab'))(...)`. Returns false, and
 * registers nothing, when `why` is null.
 */
export function unmet(why: string | null, what: string): boolean {
  if (why === null) return false;
  it(`${what}: prerequisite`, (ctx) => {
    if (isCI()) throw new Error(`${what} cannot run here: ${why} (under CI a missing prerequisite is a failure, not a skip)`);
    ctx.skip(why);
  });
  return true;
}

/**
 * For a block that returns early when it cannot run here (and so registers none of its tests): one
 * test that stands for the whole block, skipped with `why` (a failure under CI).
 */
export function notRunHere(why: string, what: string): void {
  it(`${what} (not run here)`, (ctx) => skipBecause(ctx, why));
}

/** Inside a test: stops it here, skipped with `why` (a failure under CI). */
export function skipBecause(ctx: TestContext, why: string): never {
  if (isCI()) throw new Error(`${why} (under CI a missing prerequisite is a failure, not a skip)`);
  return ctx.skip(why);
}

/** Whether network namespaces can be made here: root, and `ip netns` works. */
export function canNetns(): boolean {
  if (process.getuid?.() !== 0) return false;
  return spawnSync('ip', ['netns', 'list']).status === 0;
}
