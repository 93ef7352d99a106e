// The wake-up probe (scripts/bench/wake-probe/: issue 19, the added latency across CPUs) builds, and its
// report is whole and ordered: every layout run.sh uses answers with N round trips whose p50 <= p90 <=
// p99 <= max, all above zero; a bad argument is refused with exit 2. How long a round trip takes is the
// machine's (docs/performance.md), not a verdict here. Needs cc and 2 CPUs.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { unmet } from './helpers/prerequisite.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

function whyCannotRun(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (cpus().length < 2) return 'fewer than 2 CPUs';
  if (spawnSync('cc', ['--version'], { stdio: 'ignore' }).status !== 0) return 'no C compiler (cc)';
  return null;
}

describe.skipIf(unmet(whyCannotRun(), 'the wake-up probe'))('the wake-up probe (scripts/bench/wake-probe)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'slbx-wake-'));
  const bin = join(dir, 'wake-probe');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('builds without warnings', () => {
    const r = spawnSync('cc', ['-O2', '-Wall', '-Wextra', '-pthread', '-o', bin, join(ROOT, 'scripts/bench/wake-probe/wake-probe.c')], {
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
  });

  it.each([
    ['same', ['--a', '0', '--b', '0']],
    ['cross', ['--a', '0', '--b', '1']],
    ['spin', ['--a', '0', '--b', '1', '--spin']],
    ['awake', ['--a', '0', '--b', '1', '--awake']],
  ])('%s: N round trips, p50 <= p90 <= p99 <= max', (_name, args) => {
    const r = spawnSync(bin, [...args, '--count', '60', '--interval-us', '200'], { encoding: 'utf8', timeout: 30_000 });
    expect(r.status, r.stderr).toBe(0);
    const m = /^rtt_us n (\d+) p50 ([\d.]+) p90 ([\d.]+) p99 ([\d.]+) max ([\d.]+)\n$/.exec(r.stdout);
    expect(m, r.stdout).not.toBeNull();
    const [n, p50, p90, p99, max] = m!.slice(1).map(Number) as [number, number, number, number, number];
    expect(n).toBe(60);
    expect(p50).toBeGreaterThan(0);
    expect(p50).toBeLessThanOrEqual(p90);
    expect(p90).toBeLessThanOrEqual(p99);
    expect(p99).toBeLessThanOrEqual(max);
  });

  it('refuses an unknown argument and a count of 0', () => {
    expect(spawnSync(bin, ['--bogus'], { encoding: 'utf8' }).status).toBe(2);
    expect(spawnSync(bin, ['--count', '0'], { encoding: 'utf8' }).status).toBe(2);
  });
});
