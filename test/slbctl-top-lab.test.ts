// `slbctl top` in a real terminal: a namespace lab (examples/lab.yaml), a steady HTTP load from client1
// (100 new connections a second), and top running in tmux in the controller's namespace. The test reads
// the screen (tmux capture-pane) and compares top's rates with independent counts over the same window:
// the packets client1's eth0 sent (the kernel's interface counter), and the TCP connections client1
// opened (ActiveOpens of the kernel's TCP MIB, /proc/net/snmp), each one new flow at a MUX. Tolerance:
// the median of top's screens within RATE_TOLERANCE (20 %) of the client's average rate (top's rates
// span 2 s heartbeats, the client's 10 s; a loaded machine makes the load uneven), for the MUXes'
// packets/s and for the backends' new flows/s summed; the backends' packet rates sum to the MUXes'
// (within 10 %: the MUXes also count ARP); the VIP rule's new flows/s is the backends' sum; q ends top
// with status 0. Not root: skipped, except under CI.
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
  const name = `slbx-hG-top-${process.pid}`;
  const sock = `slbx-hG-top-${process.pid}`;
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
    // Tcp: ActiveOpens in client1's namespace (RFC 1213 tcpActiveOpens): the connections it opened
    const activeOpens = () => {
      const snmp = bash(`lab_use ${name}; lab_exec client1 cat /proc/net/snmp`).stdout.split('\n');
      const [head, values] = snmp.filter((l) => l.startsWith('Tcp:'));
      const i = (head ?? '').trim().split(/\s+/).indexOf('ActiveOpens');
      return i < 0 ? NaN : Number((values ?? '').trim().split(/\s+/)[i]);
    };
    const t0 = Date.now();
    const tx0 = txPackets();
    const opens0 = activeOpens();
    const muxSamples: number[] = [];
    const newFlowSamples: number[] = [];
    const sums: { mux: number; backends: number; ruleNew: number; backendsNew: number }[] = [];
    let lastClock = '';
    while (Date.now() - t0 < 10_000) {
      await sleep(700);
      const s = screen();
      const clock = /slbctl top - (\S+)/.exec(s)?.[1] ?? '';
      if (clock === lastClock) continue;
      lastClock = clock;
      const m1 = column(s, /^mux1\s/, 1);
      const m2 = column(s, /^mux2\s/, 1);
      // backend lines end PKTS/S BITS/S NEW-FLOWS/S SHARE DELIVERED/S DSR/S
      const nics = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'];
      const backends = nics.map((b) => column(s, new RegExp(`^\\s+-> ${b}\\s`), -6));
      const backendsNew = nics.map((b) => column(s, new RegExp(`^\\s+-> ${b}\\s`), -4));
      const ruleNew = column(s, /^203\.0\.113\.10:80\/tcp\s/, -1);
      if (m1 === null || m2 === null || ruleNew === null || [...backends, ...backendsNew].some((b) => b === null)) continue;
      muxSamples.push(m1 + m2);
      const newSum = backendsNew.reduce((a, b) => a! + b!, 0)!;
      newFlowSamples.push(newSum);
      sums.push({ mux: m1 + m2, backends: backends.reduce((a, b) => a! + b!, 0)!, ruleNew, backendsNew: newSum });
    }
    const tx1 = txPackets();
    const opens1 = activeOpens();
    const elapsedS = (Date.now() - t0) / 1000;
    const clientRate = (tx1 - tx0) / elapsedS;
    const opensRate = (opens1 - opens0) / elapsedS;
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
    // new flows: the backends' column under traffic, against the connections client1 opened
    const topNew = median(newFlowSamples);
    console.log(`top: median ${topNew.toFixed(1)} new flows/s over the backends; client1 opened ${opensRate.toFixed(1)} connections/s`);
    console.log(`top's last screen:\n${last}`);
    expect(opensRate, 'client1 opened connections').toBeGreaterThan(20);
    expect(topNew, `new flows/s column\n${last}`).toBeGreaterThan(0);
    expect(
      Math.abs(topNew / opensRate - 1),
      `top: median ${topNew.toFixed(1)} new flows/s over the backends (${newFlowSamples.map((x) => x.toFixed(1)).join(', ')}); client1: ${opensRate.toFixed(1)} connections/s\n${last}`,
    ).toBeLessThanOrEqual(RATE_TOLERANCE);
    // the one rule with traffic carries every new flow (both columns rounded for the screen: 1 or 5 %)
    for (const x of sums)
      expect(Math.abs(x.ruleNew - x.backendsNew), `rule ${x.ruleNew} vs backends ${x.backendsNew}\n${last}`).toBeLessThanOrEqual(
        Math.max(2, 0.05 * x.backendsNew),
      );
    expect(last).toMatch(/-> h1vm1\s+up\s+50\s+1\s+new flows/);

    tmux('send-keys', '-t', 'top', 'q');
    const quitBy = Date.now() + 20_000;
    while (!existsSync(rcFile) && Date.now() < quitBy) await sleep(200);
    expect(existsSync(rcFile), `top did not quit on q:\n${screen()}`).toBe(true);
    expect(readFileSync(rcFile, 'utf8').trim()).toBe('0');
  }, 180_000);
});
