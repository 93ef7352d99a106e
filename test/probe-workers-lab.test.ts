// Health probes of a host agent with --workers 2 (root, a namespace lab): a probe's answer reaches the
// main thread only through the worker whose port socket got it, so the agent starts probing once every
// worker joined its fanout groups (host-agent/daemon.ts startProbesWhenJoined). Probing from the start
// instead sent the first round before the workers had sockets for the answers: those probes failed (a
// DIP could be reported down right after the start). Judged on the first result of every probe target of
// both hosts: each is a success (the backends' HTTP servers run before the agents start, lab_up).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unmet } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function whyCannotRun(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root';
  if (spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status !== 0) return '`ip netns` is not available';
  for (const f of ['dist/host-agent/main.js', 'dist/mux/main.js', 'dist/scripts/lab/backend.js', 'native/build/Release/slbx_ring.node'])
    if (!existsSync(join(ROOT, f))) return `${f} is missing (build first)`;
  return null;
}

interface Target {
  key: string;
  sent: number;
  succeeded: number;
  failed: number;
}

describe.skipIf(unmet(whyCannotRun(), 'the probes-with-workers namespace test'))(
  'host agent --workers 2: probes start once the workers joined',
  () => {
    const name = `probe-workers-${process.pid}`;
    const env = { ...process.env, LAB_DAEMON_IO: 'ring', LAB_HOST_WORKERS: '2' };
    const bash = (script: string, timeoutMs = 60_000) => {
      const r = spawnSync('bash', ['-c', `set -u; source scripts/lab/lib.sh; ${script}`], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: timeoutMs,
        env,
      });
      return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
    };
    let prefix = '';
    let failed = true;

    beforeAll(() => {
      const r = bash(`lab_up --name ${name} --no-controller`, 110_000);
      if (r.status !== 0) throw new Error(`lab_up failed (${r.status}):\n${r.out}`);
      prefix = /^SLBX_LAB_PREFIX=(\S+)$/m.exec(readFileSync(join(ROOT, 'runs/lab', name, 'state.env'), 'utf8'))![1]!;
    }, 120_000);

    afterAll(() => {
      const r = bash(`lab_down ${name}`);
      if (r.status !== 0) throw new Error(`lab_down failed:\n${r.out}`);
      if (!failed) rmSync(join(ROOT, 'runs/lab', name), { recursive: true, force: true });
    });

    const targets = (host: string): Target[] => {
      const r = spawnSync('ip', ['netns', 'exec', `${prefix}${host}`, 'curl', '-s', '-m', '2', 'http://127.0.0.1:9181/status'], {
        encoding: 'utf8',
      });
      if (r.status !== 0) throw new Error(`GET /status of ${host}: curl exit ${r.status} ${r.stderr}`);
      return (JSON.parse(r.stdout) as { probeTargets: Target[] }).probeTargets.map((t) => ({ ...t, key: `${host} ${t.key}` }));
    };

    it("every probe target's first result is a success", () => {
      const all = () => [...targets('host1'), ...targets('host2')];
      const t0 = performance.now();
      let now = all();
      // the first result of each target: a target with one result (success or failure) is judged
      while (!(now.length === 8 && now.every((t) => t.succeeded + t.failed >= 1)) && performance.now() - t0 < 60_000) {
        spawnSync('sleep', ['0.05']);
        now = all();
      }
      expect(now.length, JSON.stringify(now)).toBe(8);
      expect(
        now.filter((t) => t.failed > 0).map((t) => `${t.key}: ${t.failed} failed of ${t.sent}`),
        'probes that failed in the first round',
      ).toEqual([]);
      failed = false;
    }, 90_000);
  },
);
