// A vitest reporter (vitest.config.ts): after the run, one line with the number of skipped tests and
// why, e.g. `vitest: 31 skipped (not root: 29; tshark is not installed: 2)`. A skipped test that gives
// no reason (ctx.skip(why), or test/helpers/prerequisite.ts) is listed as such. Under CI every skip
// fails the run. With $SLBX_SKIP_SUMMARY set, the line is also written to that file (scripts/test.sh
// puts it in its final summary).
import { writeFileSync } from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';
import { isCI } from './prerequisite.js';

export default class SkipSummary implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const reasons = new Map<string, number>();
    const silent: string[] = [];
    let skipped = 0;
    for (const m of modules) {
      // a block skipped by unmet() carries its reason on its prerequisite test: its other tests share it
      const noted = new Set<string>();
      const unnoted: string[] = [];
      for (const t of m.children.allTests()) {
        const r = t.result();
        // under CI the prerequisite test fails instead: its message is the reason of the block's skips
        if (r.state === 'failed' && t.name.endsWith(': prerequisite')) noted.add(r.errors[0]?.message ?? t.name);
        if (r.state !== 'skipped') continue;
        // the prerequisite test only carries the reason: the block's own tests are what was skipped
        if (t.name.endsWith(': prerequisite')) {
          if (r.note) noted.add(r.note);
          continue;
        }
        skipped++;
        if (r.note !== undefined && r.note !== '') {
          noted.add(r.note);
          reasons.set(r.note, (reasons.get(r.note) ?? 0) + 1);
        } else unnoted.push(t.fullName);
      }
      if (unnoted.length === 0) continue;
      if (noted.size > 0) {
        const key = [...noted].join(' / ');
        reasons.set(key, (reasons.get(key) ?? 0) + unnoted.length);
      } else {
        silent.push(...unnoted.map((n) => `${m.moduleId.replace(`${process.cwd()}/`, '')}: ${n}`));
      }
    }
    if (silent.length > 0) reasons.set('no reason given', silent.length);
    const line = `vitest: ${skipped} skipped${skipped > 0 ? ` (${[...reasons].map(([k, v]) => `${k}: ${v}`).join('; ')})` : ''}`;
    process.stdout.write(`\n${line}\n`);
    for (const s of silent) process.stdout.write(`  skipped without a reason: ${s}\n`);
    if (isCI() && skipped > 0) {
      process.stdout.write('vitest: under CI a skipped test is a failure (CI is set)\n');
      process.exitCode = 1;
    }
    const file = process.env.SLBX_SKIP_SUMMARY;
    if (file) writeFileSync(file, `${line.replace(/^vitest: /, '')}\n`);
  }
}
