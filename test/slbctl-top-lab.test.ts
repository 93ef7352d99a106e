// `slbctl top` in a real terminal: a namespace lab (examples/lab.yaml), a steady HTTP load from client1
// (100 new connections a second), and top running in tmux in the controller's namespace. The test reads
// the screen (tmux capture-pane) and compares top's rates with an independent count: the packets client1's
// eth0 sent (the kernel's interface counter) over the same window. Tolerance: the median of top's
// screens within RATE_TOLERANCE (20 %) of the client's average rate (top's rates span 2 s heartbeats, the
// client's 10 s; a loaded machine makes the load uneven); the backends' rates sum to the MUXes' (within
// 10 %: the MUXes also count ARP); q ends top with status 0. Not root: skipped, except under CI.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unmet } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RATE_TOLERANCE = 0.2;

function bash(script: string, timeoutMs = 60_000) {
  const r = spawnSync('bash', ['-c', `set -u; source scripts/lab/lib.sh; ${script}`], { cwd: ROOT, encoding: 'utf8', timeout: timeoutMs });
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, stdout: r.stdout ?? '' };
}

function whyCannotRun(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root';
  if (spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status !== 0) return '`ip netns` is not available';
  if (spawnSync('tmux', ['-V'], { stdio: 'ignore' }).error !== undefined) return 'tmux is not installed (apt-get install tmux)';
  for (const f of ['dist/cli/slbctl.js', 'dist/cli/top.js', 'dist/scripts/lab/client.js'])
    if (!existsSync(join(ROOT, f))) return `${f} is missing (build first)`;
  return null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The number in top's cell `col` (0-based; negative: from the end) of the line matching `name`. */
function column(screen: string, name: RegExp, col: number): number | null {
  const line = screen.split('\n').find((l) => name.test(l));
  if (line === undefined) return null;
  const cells = line.trim().split(/\s+/);
  return parseRate(cells.at(col) ?? '-');
}

/** top's human rates: 123, 4.5, 12.3k, 2.50M. */
function parseRate(s: string): number | null {
  const m = /^([\d.]+)([kMG]?)$/.exec(s);
  if (m === null) return null;
  return Number(m[1]) * ({ '': 1, k: 1e3, M: 1e6, G: 1e9 } as Record<string, number>)[m[2]!]!;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe.skipIf(unmet(whyCannotRun(), 'slbctl top in tmux'))('slbctl top in tmux over a namespace lab', () => {
  const name = `slbx-hH-top-${process.pid}`;
  const sock = `slbx-hH-top-${process.pid}`;
  const work = mkdtempSync(join(tmpdir(), 'slbx-top-'));
  let traffic: ChildProcess | null = null;
  const tmux = (...args: string[]) => spawnSync('tmux', ['-L', sock, ...args], { encoding: 'utf8' });
  const screen = () => tmux('capture-pane', '-p', '-t', 'top').stdout;

  beforeAll(() => {
    const r = bash(`lab_up --name ${name}`, 300_000);
    if (r.status !== 0) throw new Error(`lab_up failed (${r.status}):\n${r.out}`);
  }, 320_000);

  afterAll(() => {
    traffic?.kill('SIGTERM');
    tmux('kill-server');
    bash(`lab_down ${name}`, 120_000);
    rmSync(work, { recursive: true, force: true });
  }, 150_000);

  it('shows per-MUX and per-backend packet rates that match the client, and quits on q', async () => {
    traffic = spawn(
      'bash',
      [
        '-c',
        `source scripts/lab/lib.sh; lab_use ${name}; lab_exec client1 node dist/scripts/lab/client.js http --url http://203.0.113.10/ --count 6000 --concurrency 16 --rate 100`,
      ],
      { cwd: ROOT, stdio: 'ignore' },
    );
    const rcFile = join(work, 'top.rc');
    const cmd = `cd ${ROOT} && scripts/lab.sh exec --name ${name} controller node dist/cli/slbctl.js top --interval 1; echo $? > ${rcFile}`;
    const t = tmux('new-session', '-d', '-s', 'top', '-x', '200', '-y', '50', cmd);
    expect(t.status, t.stderr).toBe(0);

    // evidence that the load is flowing and top has two heartbeats of every MUX: rates on both MUX lines
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const s = screen();
      if ((column(s, /^mux1\s/, 1) ?? 0) > 0 && (column(s, /^mux2\s/, 1) ?? 0) > 0) break;
      await sleep(500);
    }
    const txPackets = () => Number(bash(`lab_use ${name}; lab_exec client1 cat /sys/class/net/eth0/statistics/tx_packets`).stdout.trim());
    const t0 = Date.now();
    const tx0 = txPackets();
    const muxSamples: number[] = [];
    const sums: { mux: number; backends: number }[] = [];
    let lastClock = '';
    while (Date.now() - t0 < 10_000) {
      await sleep(700);
      const s = screen();
      const clock = /slbctl top - (\S+)/.exec(s)?.[1] ?? '';
      if (clock === lastClock) continue;
      lastClock = clock;
      const m1 = column(s, /^mux1\s/, 1);
      const m2 = column(s, /^mux2\s/, 1);
      const backends = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'].map((b) => column(s, new RegExp(`^\\s+-> ${b}\\s`), -3));
      if (m1 === null || m2 === null || backends.some((b) => b === null)) continue;
      muxSamples.push(m1 + m2);
      sums.push({ mux: m1 + m2, backends: backends.reduce((a, b) => a! + b!, 0)! });
    }
    const tx1 = txPackets();
    const clientRate = (tx1 - tx0) / ((Date.now() - t0) / 1000);
    const last = screen();
    expect(muxSamples.length, `screens read:\n${last}`).toBeGreaterThanOrEqual(4);
    expect(clientRate, 'client1 sent a load').toBeGreaterThan(100);
    const topRate = median(muxSamples);
    console.log(
      `top: median ${topRate.toFixed(0)} pkts/s over the MUXes of ${muxSamples.length} screens; client1 eth0: ${clientRate.toFixed(0)} pkts/s`,
    );
    expect(
      Math.abs(topRate / clientRate - 1),
      `top: median ${topRate.toFixed(0)} pkts/s over the MUXes (${muxSamples.map((x) => x.toFixed(0)).join(', ')}); client1 eth0: ${clientRate.toFixed(0)} pkts/s\n${last}`,
    ).toBeLessThanOrEqual(RATE_TOLERANCE);
    for (const x of sums)
      expect(Math.abs(x.backends / x.mux - 1), `backends ${x.backends} vs MUXes ${x.mux}\n${last}`).toBeLessThanOrEqual(0.1);
    expect(last).toMatch(/-> h1vm1\s+up\s+50\s+1\s+new flows/);

    tmux('send-keys', '-t', 'top', 'q');
    const quitBy = Date.now() + 20_000;
    while (!existsSync(rcFile) && Date.now() < quitBy) await sleep(200);
    expect(existsSync(rcFile), `top did not quit on q:\n${screen()}`).toBe(true);
    expect(readFileSync(rcFile, 'utf8').trim()).toBe('0');
  }, 180_000);
});
