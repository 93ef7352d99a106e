// The lab's delay links in a real namespace lab (root): round trips measured from outside the device (a
// UDP echo, scripts/lab/delay-rtt.ts) match the configured delay at 5, 15, 40 and 60 ms, changed live;
// each pair has its own delay (two MUXes see one host at different distances); frames keep their order
// across a live change to a smaller delay (60 -> 0 ms, frames then pass at once once the queue is empty), none lost at 2,000 a second; a full queue drops, and every
// datagram lost is a frame the device counted as drop_queue_full; a nic's link (the nic and its host).
// Bounds (docs/lab.md, "Delay links"): no round trip shorter than the delay - 1 ms (a frame leaves at
// most 0.5 ms early each way: that is exact, whatever the load); the fastest within MIN_SLACK_MS above the
// delay + the baseline's fastest; the median within MEDIAN_SLACK_MS (a busy machine's timers fire late). Not root: skipped, except under CI, where it fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unmet } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/**
 * The fastest round trip shows what the device adds when it is not starved of CPU: at most this much
 * above the delay + the baseline's fastest (timers fire on whole milliseconds; measured +0..+1 ms).
 */
const MIN_SLACK_MS = 2;
/**
 * The median also carries the machine's scheduling delays. The device runs at real-time priority
 * (scripts/lab/delay.sh), and so do the echo server and the client here (RT), so that a loaded machine
 * does not stand between them and the wire: measured +0..+1 ms at load averages 23-30 on this 2-core VM
 * (ordinary processes: +16..+31 ms at 30). Judged with this slack.
 */
const MEDIAN_SLACK_MS = 5;
/** The echo server and the measuring client run at the device's priority (SCHED_FIFO 10) when chrt exists. */
const RT = spawnSync('sh', ['-c', 'command -v chrt'], { stdio: 'ignore' }).status === 0 ? ['chrt', '-f', '10'] : [];
/** A frame may leave RELEASE_EARLY_MS (0.5) early each way: a round trip is never shorter than this below the delay. */
const EARLY_MS = 1;
/** Frames by which the datagrams lost and the drops counted may differ on a full queue (see that test). */
const LOSS_SLACK = 3;

function bash(script: string, timeoutMs = 60_000) {
  const r = spawnSync('bash', ['-c', `set -u; source scripts/lab/lib.sh; ${script}`], { cwd: ROOT, encoding: 'utf8', timeout: timeoutMs });
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`, stdout: r.stdout ?? '' };
}

function whyCannotRun(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root';
  if (spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status !== 0) return '`ip netns` is not available';
  for (const f of ['dist/scripts/lab/delay-link.js', 'dist/scripts/lab/delay-rtt.js', 'dist/scripts/lab/backend.js'])
    if (!existsSync(join(ROOT, f))) return `${f} is missing (build first)`;
  if (!existsSync(join(ROOT, 'native/build/Release/slbx_ring.node'))) return 'the ring addon is not built (npm run build:native)';
  return null;
}

interface Rtt {
  sent: number;
  received: number;
  lost: number;
  reordered: number;
  duplicates: number;
  minMs: number;
  medianMs: number;
  p99Ms: number;
  maxMs: number;
  /** datagrams the client's own socket refused to send (counted as lost) */
  sendErrors?: number;
}
interface DirStatus {
  frames: number;
  drop_queue_full: number;
  maxQueueFrames: number;
}
interface DeviceStatus {
  generation: number;
  pairs: { owner: string; peer: string; ms: number; out: DirStatus; in: DirStatus }[];
  links: { owner: string; drop_ring_full_out: number; drop_ring_full_in: number; send_error_out: number; send_error_in: number }[];
}

describe.skipIf(unmet(whyCannotRun(), 'the delay link namespace test'))('delay links in a namespace lab', () => {
  const name = `delay-${process.pid}`;
  const work = mkdtempSync(join(tmpdir(), 'slbx-delay-'));
  const delays = join(work, 'delays.yaml');
  let prefix = '';
  const echoes: ChildProcess[] = [];
  const measured: Record<string, Rtt> = {};

  beforeAll(async () => {
    writeFileSync(
      delays,
      'delays:\n  - { between: [mux1, host1], ms: 0 }\n  - { between: [mux2, host1], ms: 0 }\n  - { between: [h1vm1, host1], ms: 0 }\n',
    );
    const r = bash(`lab_up --name ${name} --no-daemons --delays ${delays}`, 120_000);
    if (r.status !== 0) throw new Error(`lab_up failed (${r.status}):\n${r.out}`);
    prefix = /^SLBX_LAB_PREFIX=(\S+)$/m.exec(readFileSync(join(ROOT, 'runs/lab', name, 'state.env'), 'utf8'))![1]!;
    // echo servers: host1 on the fabric; h1vm1 behind its port, which gets the gateway's address here
    // (no host agent in this lab: the host's namespace reaches the nic directly over the port)
    const ip = spawnSync('ip', ['-n', `${prefix}host1`, 'addr', 'add', '192.0.2.1/24', 'dev', 'h1vm1'], { encoding: 'utf8' });
    if (ip.status !== 0) throw new Error(`ip addr add: ${ip.stderr}`);
    // each ready once it says it listens (its socket is bound): a fixed sleep was a race on a busy machine,
    // where the first round trips then met no server (lost, or the client's socket refused)
    const ready: Promise<void>[] = [];
    for (const [node, addr] of [
      ['host1', '198.18.0.21:7900'],
      ['h1vm1', '192.0.2.10:7900'],
    ] as const) {
      const p = spawn(
        'ip',
        ['netns', 'exec', `${prefix}${node}`, ...RT, 'node', 'dist/scripts/lab/delay-rtt.js', 'echo', '--listen', addr],
        { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      echoes.push(p);
      ready.push(
        new Promise<void>((res, rej) => {
          let out = '';
          const seen = (d: Buffer) => {
            out += d.toString();
            if (out.includes(`echo listening on ${addr}`)) res();
          };
          p.stdout!.on('data', seen);
          p.stderr!.on('data', seen);
          p.on('exit', (c) => rej(new Error(`the echo server in ${node} exited (${c}) before it listened:\n${out}`)));
        }),
      );
    }
    await Promise.all(ready);
  }, 180_000);

  afterAll(() => {
    for (const p of echoes) if (p.pid !== undefined && p.exitCode === null) process.kill(p.pid, 'SIGTERM');
    const r = bash(`lab_down ${name}`);
    rmSync(work, { recursive: true, force: true });
    writeFileSync(join(ROOT, 'runs', `delay-link-measured.json`), `${JSON.stringify(measured, null, 1)}\n`);
    if (r.status !== 0) throw new Error(`lab_down failed:\n${r.out}`);
  });

  const setDelay = (a: string, b: string, ms: number) => {
    const r = bash(`lab_use ${name} && lab_delay_set ${a} ${b} ${ms}`);
    if (r.status !== 0) throw new Error(`lab_delay_set ${a} ${b} ${ms}: ${r.out}`);
  };
  const status = (node = 'fabric'): DeviceStatus => {
    const r = bash(`lab_use ${name} && lab_delay_status ${node}`);
    if (r.status !== 0) throw new Error(`lab_delay_status: ${r.out}`);
    return JSON.parse(r.stdout) as DeviceStatus;
  };
  const pairOf = (s: DeviceStatus, owner: string, peer: string) => s.pairs.find((p) => p.owner === owner && p.peer === peer)!;
  const measure = (from: string, target: string, count: number, rate: number, extra: string[] = []): Rtt => {
    const r = spawnSync(
      'ip',
      [
        'netns',
        'exec',
        `${prefix}${from}`,
        ...RT,
        'node',
        'dist/scripts/lab/delay-rtt.js',
        'measure',
        '--target',
        target,
        '--count',
        String(count),
        '--rate',
        String(rate),
        ...extra,
      ],
      { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
    );
    if (r.status !== 0) throw new Error(`measure from ${from}: exit ${r.status}\n${r.stdout}${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').pop()!) as Rtt;
  };
  /** The round trip matches the delay: never shorter than it allows, the median within the slack. */
  const expectDelay = (what: string, m: Rtt, base: Rtt, ms: number) => {
    measured[what] = m;
    expect(m.lost, `${what}: lost`).toBe(0);
    expect(m.reordered, `${what}: reordered`).toBe(0);
    expect(m.minMs, `${what}: shortest round trip`).toBeGreaterThanOrEqual(ms - EARLY_MS);
    expect(m.medianMs, `${what}: median round trip`).toBeGreaterThanOrEqual(ms - EARLY_MS);
    expect(m.minMs, `${what}: shortest round trip`).toBeLessThanOrEqual(base.minMs + ms + MIN_SLACK_MS);
    expect(m.medianMs, `${what}: median round trip`).toBeLessThanOrEqual(base.medianMs + ms + MEDIAN_SLACK_MS);
  };

  it('round trips through the link match the configured delay, changed live: 5, 15, 40, 60 ms', () => {
    const base = measure('mux1', '198.18.0.21:7900', 100, 50);
    measured['mux1-host1 0 ms'] = base;
    expect(base.lost).toBe(0);
    for (const ms of [5, 15, 40, 60]) {
      setDelay('mux1', 'host1', ms);
      expectDelay(`mux1-host1 ${ms} ms`, measure('mux1', '198.18.0.21:7900', 200, 50), base, ms);
    }
    const p = pairOf(status(), 'mux1', 'host1');
    expect(p.ms).toBe(60);
    expect(p.out.drop_queue_full + p.in.drop_queue_full).toBe(0);
  }, 300_000);

  it('each pair has its own delay: mux2 sees host1 at 15 ms while mux1 sees it at 60', () => {
    const base = measure('mux2', '198.18.0.21:7900', 100, 50);
    measured['mux2-host1 0 ms'] = base;
    setDelay('mux2', 'host1', 15);
    expectDelay('mux2-host1 15 ms (mux1 at 60)', measure('mux2', '198.18.0.21:7900', 200, 50), base, 15);
    expectDelay('mux1-host1 60 ms (mux2 at 15)', measure('mux1', '198.18.0.21:7900', 100, 50), measured['mux1-host1 0 ms']!, 60);
  }, 300_000);

  it('frames keep their order across a live change to no delay (60 -> 0 ms); none lost at 2,000 a second', async () => {
    setDelay('mux1', 'host1', 60);
    const before = pairOf(status(), 'mux1', 'host1').out.frames;
    const file = join(work, 'stream.json');
    // The stream runs until the change is applied (`changed` exists), then 4,000 more (2 s at 0 ms): a
    // stream of a fixed length (8 s) raced the status polls and lab_delay_set, ordinary processes that
    // take seconds each on a busy machine, and could end before the change (no short round trip seen).
    const changed = join(work, 'changed');
    const count = 4_000;
    const child = spawn(
      'ip',
      [
        'netns',
        'exec',
        `${prefix}mux1`,
        ...RT,
        'node',
        'dist/scripts/lab/delay-rtt.js',
        'measure',
        '--target',
        '198.18.0.21:7900',
        '--count',
        String(count),
        '--rate',
        '2000',
        '--size',
        '200',
        '--until',
        changed,
        '--json',
        file,
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const done = new Promise<number>((res) => child.on('exit', (c) => res(c ?? 1)));
    try {
      // the change comes once the stream runs (evidence: 1,000 of its frames went through the link)
      while (pairOf(status(), 'mux1', 'host1').out.frames - before < 1000 && child.exitCode === null)
        await new Promise((r) => setTimeout(r, 50));
      setDelay('mux1', 'host1', 0);
    } finally {
      writeFileSync(changed, '');
    }
    expect(await done, out).toBe(0);
    const r = JSON.parse(readFileSync(file, 'utf8')) as Rtt & { rttMs: (number | null)[] };
    const { rttMs, ...report } = r;
    measured['stream 2000/s, 60 -> 0 ms'] = report;
    expect(r.lost).toBe(0);
    expect(r.duplicates).toBe(0);
    expect(r.reordered, 'datagrams answered out of order').toBe(0);
    // both delays were seen by this stream, the long one first: the change happened inside it
    const firstShort = rttMs.findIndex((x) => x !== null && x < 30);
    expect(rttMs[0]).toBeGreaterThanOrEqual(59);
    expect(firstShort).toBeGreaterThan(0);
    expect(r.sent).toBeGreaterThanOrEqual(1000 + count);
    const p = pairOf(status(), 'mux1', 'host1');
    expect(p.out.drop_queue_full + p.in.drop_queue_full).toBe(0);
  }, 300_000);

  it('a full queue drops: every datagram lost is a frame counted as drop_queue_full, the queue never above its limit', () => {
    // queueFrames 100, and 400 ms (200 each way): at 2,000 a second 400 frames would wait per direction
    const file = join(ROOT, 'runs/lab', name, 'delays.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^queueFrames: \d+$/m, 'queueFrames: 100'));
    setDelay('mux1', 'host1', 400);
    const s0 = status();
    const p0 = pairOf(s0, 'mux1', 'host1');
    const ring0 = s0.links.find((l) => l.owner === 'mux1')!;
    const m = measure('mux1', '198.18.0.21:7900', 2000, 2000, ['--size', '200']);
    measured['queue 100, 400 ms, 2000/s'] = m;
    const s1 = status();
    const p1 = pairOf(s1, 'mux1', 'host1');
    const ring1 = s1.links.find((l) => l.owner === 'mux1')!;
    const drops = p1.out.drop_queue_full - p0.out.drop_queue_full + p1.in.drop_queue_full - p0.in.drop_queue_full;
    const ringDrops = ring1.drop_ring_full_out - ring0.drop_ring_full_out + ring1.drop_ring_full_in - ring0.drop_ring_full_in;
    // a frame the device could not send (the kernel refused it: send_error_*) and a datagram the client's
    // own socket refused are counted losses too (a fresh-root run lost 1,505 with 1,504 counted as drops)
    const sendErrors = ring1.send_error_out - ring0.send_error_out + ring1.send_error_in - ring0.send_error_in;
    expect(drops).toBeGreaterThan(0);
    // Equal but for LOSS_SLACK frames either way: the link also carries the lab's own frames (ARP and
    // IPv6 neighbour discovery between mux1 and host1), and one of them dropped from the full queue is
    // counted without losing a datagram (two runs under load counted one more than was lost); a datagram
    // refused by a full socket receive buffer is lost without a drop of the device (a fresh-root run lost
    // one more than it counted). A device that did not count its drops misses by hundreds.
    const explained = drops + ringDrops + sendErrors + (m.sendErrors ?? 0);
    expect(
      Math.abs(m.lost - explained),
      `lost ${m.lost}: queue full ${drops}, ring full ${ringDrops}, device send errors ${sendErrors}, client send errors ${m.sendErrors ?? 0}; device: ${JSON.stringify({ pair: p1, link: ring1, scheduling: (s1 as { scheduling?: unknown }).scheduling, loop: (s1 as { loop?: unknown }).loop })}`,
    ).toBeLessThanOrEqual(LOSS_SLACK);
    expect(m.lost).toBeGreaterThan(100 * LOSS_SLACK); // the queue really overflowed: the slack is noise next to it
    expect(p1.out.maxQueueFrames).toBeLessThanOrEqual(100);
    expect(p1.in.maxQueueFrames).toBeLessThanOrEqual(100);
    expect(m.reordered).toBe(0);
  }, 300_000);

  it("a nic's link (the nic and its host) delays everything on its port", () => {
    const base = measure('host1', '192.0.2.10:7900', 100, 50);
    measured['host1-h1vm1 0 ms'] = base;
    setDelay('h1vm1', 'host1', 15);
    expectDelay('host1-h1vm1 15 ms', measure('host1', '192.0.2.10:7900', 200, 50), base, 15);
    const p = pairOf(status('host1'), 'h1vm1', 'host1');
    expect(p.ms).toBe(15);
    expect(p.out.frames).toBeGreaterThanOrEqual(200);
  }, 300_000);
});
