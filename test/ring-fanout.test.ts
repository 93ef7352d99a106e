// PACKET_FANOUT on the ring path (--workers N): two ring sockets, each opened in its own worker thread, in
// one fanout group on a real veth pair in a namespace this test makes and removes
// (runtime/worker-fanout-check.ts injects 61 UDP flows x 40 frames, interleaved, each frame numbered; an odd
// number of flows, so that a round-robin spread (PACKET_FANOUT_LB) would split every flow, as it was seen to).
// Expected from the kernel's definition of hash mode (one socket per flow), not from slbx's code: every
// frame arrives exactly once, every flow on one socket only, in order, and both sockets get flows. The
// negative case (no group: each socket sees every frame) shows the check can tell the difference.
import { describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { canNetns, notRunHere } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ADDON = `${ROOT}native/build/Release/slbx_ring.node`;
const CHECK = `${ROOT}dist/runtime/worker-fanout-check.js`;

interface Result {
  sent: number;
  received: number;
  workers: { frames: number; flows: number; kernelDrops: number }[];
  flowsSeen: number;
  flowsSplit: number;
  outOfOrder: number;
  duplicates: number;
}

describe('PACKET_FANOUT hash mode: two ring sockets in two worker threads split flows, never a flow', () => {
  const ready = canNetns() && existsSync(ADDON) && existsSync(CHECK);
  if (!ready) {
    const why = !canNetns()
      ? 'needs root and network namespaces'
      : !existsSync(ADDON)
        ? 'the ring addon is not built (npm run build:native)'
        : 'dist is not built (npx tsc -p tsconfig.json)';
    notRunHere(why, 'PACKET_FANOUT on a veth pair');
    return;
  }

  it('every frame once, every flow on one socket and in order; without a group each socket sees all', () => {
    const ns = `slbx-test-${randomBytes(3).toString('hex')}-fanout`;
    const ip = (...a: string[]) => execFileSync('ip', a, { stdio: 'pipe' });
    ip('netns', 'add', ns);
    try {
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'link', 'add', 'dut', 'type', 'veth', 'peer', 'name', 'tester');
      ip('-n', ns, 'link', 'set', 'dut', 'up');
      ip('-n', ns, 'link', 'set', 'tester', 'up');
      execFileSync('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1']);
      const run = (extra: string[]): Result => {
        const r = spawnSync(
          'ip',
          ['netns', 'exec', ns, process.execPath, CHECK, '--dut', 'dut', '--tester', 'tester', '--flows', '61', ...extra],
          {
            encoding: 'utf8',
            timeout: 120_000,
          },
        );
        const line = r.stdout.trim().split('\n').pop() ?? '';
        expect(line, `worker-fanout-check: exit ${r.status}\n${r.stderr}`).toMatch(/^\{/);
        return JSON.parse(line) as Result;
      };
      const g = run([]);
      expect(g.sent).toBe(61 * 40);
      for (const w of g.workers) expect(w.kernelDrops).toBe(0);
      expect(g.received).toBe(g.sent);
      expect(g.flowsSeen).toBe(61);
      expect(g.flowsSplit).toBe(0);
      expect(g.outOfOrder).toBe(0);
      expect(g.duplicates).toBe(0);
      // both sockets got flows (61 flows in 2 by a hash: all on one has a chance of 2^-60)
      for (const w of g.workers) expect(w.flows).toBeGreaterThan(0);
      expect(g.workers[0]!.flows + g.workers[1]!.flows).toBe(61);
      // without a group: each socket sees every frame, so the same counts would say "split"
      const none = run(['--group', '0']);
      expect(none.received).toBe(2 * none.sent);
      expect(none.flowsSplit).toBe(61);
    } finally {
      spawnSync('ip', ['netns', 'del', ns]);
    }
  }, 300_000);
});
