#!/usr/bin/env node
// The lab's delay link (docs/lab.md, "Delay links"): a lab device, in the fabric namespace, that adds
// distance between lab nodes. The kernel here has no netem, so the lab delays frames itself, in user
// space: a node that carries a delay pair (its "owner", scripts/lab/delay-config.ts) is unplugged from the
// fabric bridge and wired through this process instead:
//
//   node fab0 ══ NODEPORT ─[delay-link]─ DEVPORT ══ DEVPORT-b ── br0 (the fabric bridge)
//
// Each frame from the node (out) is matched by its destination MAC, each frame to it (in) by its source
// MAC, to the other node of a pair (for a MUX and a nic: the inner MAC of VXLAN to or from the nic's
// host); a frame of a pair waits ms/2 in that pair's queue for its direction, so the pair's round trip
// grows by ms. Everything else (broadcasts, nodes of no pair) passes at once. Per pair and direction the
// frames keep their order (a frame never leaves before the one ahead of it, also across a live change
// to a smaller delay), a queue holds at most queueFrames (more are dropped, counted as drop_queue_full),
// and nothing of this touches an slbx daemon. SIGHUP re-reads the delays file (a bad one is refused and
// the old settings stay); GET /status on the loopback status address shows the settings and counters.
//
//   node dist/scripts/lab/delay-link.js run --plan RUN/plan.txt --delays RUN/delays.yaml --link mux1:mux1:dl1 ...
//   node dist/scripts/lab/delay-link.js check --plan RUN/plan.txt --delays FILE     (prints the owners)
//   node dist/scripts/lab/delay-link.js set --plan RUN/plan.txt --delays FILE --links mux1,mux2 A B MS
import { spawnSync } from 'node:child_process';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, runCommandAsync, type CommandSpec } from '../../runtime/command.js';
import { loadRingAddon, RingPort } from '../../runtime/ring-port.js';
import { parseListen, startStatusServer } from '../../runtime/status-server.js';
import {
  delayNodesFromPlan,
  delayOwners,
  formatDelays,
  parseDelays,
  pairKey,
  setDelay,
  type DelayNode,
  type DelaySettings,
} from './delay-config.js';

export const DELAY_STATUS_PORT = 9190;
/** A frame may leave this much before its time: timers fire on whole milliseconds (docs/lab.md). */
export const RELEASE_EARLY_MS = 0.5;
const RING_BYTES = 8 * 1024 * 1024;
const ETH_HEADER_LEN = 14;
const OUT = 0;
const IN = 1;
const DIRS = ['out', 'in'] as const;

function macNumber(text: string): number {
  return parseInt(text.replace(/:/g, ''), 16);
}

function macAt(b: Uint8Array, off: number): number {
  return b[off]! * 2 ** 40 + b[off + 1]! * 2 ** 32 + ((b[off + 2]! << 24) >>> 0) + (b[off + 3]! << 16) + (b[off + 4]! << 8) + b[off + 5]!;
}

/**
 * Offset of the inner Ethernet frame when frame[0..len) is VXLAN (IPv4 or IPv6 without extension
 * headers, UDP to or from vxlanPort), else -1. Every length is checked against len first.
 */
export function innerEthernetOffset(f: Uint8Array, len: number, vxlanPort: number): number {
  if (len < ETH_HEADER_LEN + 20) return -1;
  const type = (f[12]! << 8) | f[13]!;
  let udp: number;
  if (type === 0x0800) {
    const ihl = (f[14]! & 0x0f) * 4;
    if (f[14]! >> 4 !== 4 || ihl < 20 || f[23] !== 17) return -1;
    if (((f[20]! << 8) | f[21]!) & 0x3fff) return -1; // a fragment: no UDP header of its own
    udp = ETH_HEADER_LEN + ihl;
  } else if (type === 0x86dd) {
    if (f[14]! >> 4 !== 6 || f[20] !== 17) return -1;
    udp = ETH_HEADER_LEN + 40;
  } else return -1;
  const inner = udp + 8 + 8;
  if (len < inner + ETH_HEADER_LEN) return -1;
  const sport = (f[udp]! << 8) | f[udp + 1]!;
  const dport = (f[udp + 2]! << 8) | f[udp + 3]!;
  if (dport !== vxlanPort && sport !== vxlanPort) return -1;
  return inner;
}

/** One direction of one pair: frames in order, each with the time it may leave. */
export class FrameQueue {
  private bufs: (Buffer | null)[] = [];
  private at: number[] = [];
  private head = 0;
  /** The release time of the last frame queued: no later frame leaves before it. */
  lastRelease = 0;
  bytes = 0;

  get size(): number {
    return this.bufs.length - this.head;
  }
  push(buf: Buffer, at: number): void {
    this.bufs.push(buf);
    this.at.push(at);
    this.bytes += buf.length;
    this.lastRelease = at;
  }
  /** The release time of the first frame (Infinity when empty). */
  peekAt(): number {
    return this.head < this.bufs.length ? this.at[this.head]! : Infinity;
  }
  shift(): Buffer {
    const b = this.bufs[this.head]!;
    this.bufs[this.head] = null;
    this.head++;
    this.bytes -= b.length;
    if (this.head > 1024 && this.head * 2 > this.bufs.length) {
      this.bufs = this.bufs.slice(this.head);
      this.at = this.at.slice(this.head);
      this.head = 0;
    }
    return b;
  }
}

interface DirCounters {
  frames: number;
  bytes: number;
  /** Frames that found the queue full: dropped. */
  drop_queue_full: number;
  /** The deepest the queue was since the settings last changed (a reload resets it). */
  maxQueueFrames: number;
  /** How late frames left after their time (timer and event-loop lateness), ms. */
  lateMaxMs: number;
  lateSumMs: number;
  /** Frames that left before their time (within RELEASE_EARLY_MS). */
  early: number;
}

interface PairState {
  owner: string;
  peer: string;
  ms: number;
  halfMs: number;
  queues: [FrameQueue, FrameQueue];
  counters: [DirCounters, DirCounters];
}

const newDir = (): DirCounters => ({ frames: 0, bytes: 0, drop_queue_full: 0, maxQueueFrames: 0, lateMaxMs: 0, lateSumMs: 0, early: 0 });

interface Link {
  owner: string;
  nodePortName: string;
  devPortName: string;
  ports: [RingPort, RingPort];
  /** Peer fabric node MAC -> pair. */
  byPeer: Map<number, PairState>;
  /** nic MAC -> pair and the MAC of the nic's host (VXLAN between the owner and that host). */
  byNic: Map<number, { pair: PairState; hostMac: number }>;
  /** A nic's link (the nic and its host): every frame on it is of this one pair. */
  fixed: PairState | null;
  /** Frames not of any pair (broadcasts, other nodes), passed at once, per direction. */
  passed: [number, number];
  drop_truncated: number;
  send_error: [number, number];
}

export class DelayDevice {
  readonly links: Link[] = [];
  private pairs = new Map<string, PairState>();
  private readonly nodeByName: Map<string, DelayNode>;
  private settings: DelaySettings;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  generation = 0;
  lastReloadError: string | null = null;
  /** How late the device's own event loop ran (10 ms resolution): a frame late by about as much was
   * late because the process did not run; one much later than this, by the queue's logic. */
  private readonly loopDelay = monitorEventLoopDelay({ resolution: 10 });
  /** The garbage collector's pauses (count, longest): one cause of a late loop. */
  private readonly gc = { count: 0, maxMs: 0, sumMs: 0 };
  private readonly gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      this.gc.count++;
      this.gc.sumMs += e.duration;
      if (e.duration > this.gc.maxMs) this.gc.maxMs = e.duration;
    }
  });
  /** Set when the real-time CPU limit made the device drop to ordinary priority (demoteOnCpuLimit). */
  demoted: { at: string; result: string } | null = null;
  private readonly vxlanPort: number;

  constructor(nodes: DelayNode[], settings: DelaySettings, vxlanPort: number) {
    this.nodeByName = new Map(nodes.map((n) => [n.name, n]));
    this.settings = settings;
    this.loopDelay.enable();
    this.gcObserver.observe({ entryTypes: ['gc'] });
    this.vxlanPort = vxlanPort;
  }

  /** Opens the two ports of an owner's link (throws with the reason). */
  addLink(owner: string, nodePortName: string, devPortName: string): void {
    const r = loadRingAddon();
    if ('error' in r) throw new Error(`the delay link needs the ring addon: ${r.error}`);
    const link: Link = {
      owner,
      nodePortName,
      devPortName,
      ports: [new RingPort(nodePortName, r.addon), new RingPort(devPortName, r.addon)],
      byPeer: new Map(),
      byNic: new Map(),
      fixed: null,
      passed: [0, 0],
      drop_truncated: 0,
      send_error: [0, 0],
    };
    this.links.push(link);
    this.apply(this.settings);
    // frames from the node leave on the bridge side (out); frames from the bridge go to the node (in)
    link.ports[0].open('', (f, len, truncated) => this.onFrame(link, OUT, f, len, truncated), RING_BYTES);
    link.ports[1].open('', (f, len, truncated) => this.onFrame(link, IN, f, len, truncated), RING_BYTES);
  }

  /** Installs new settings: pairs kept by key keep their queues (and their order); delays change. */
  apply(s: DelaySettings): void {
    this.settings = s;
    const next = new Map<string, PairState>();
    const here = new Set(this.links.map((l) => l.owner));
    for (const p of s.pairs) {
      if (!here.has(p.owner)) continue; // carried by another device (another namespace)
      const key = pairKey(p.owner, p.peer);
      const st = this.pairs.get(key) ?? {
        owner: p.owner,
        peer: p.peer,
        ms: p.ms,
        halfMs: p.ms / 2,
        queues: [new FrameQueue(), new FrameQueue()],
        counters: [newDir(), newDir()],
      };
      st.ms = p.ms;
      st.halfMs = p.ms / 2;
      // the deepest queue is told per settings: since the last change (or start)
      for (const c of st.counters) c.maxQueueFrames = 0;
      next.set(key, st);
    }
    // a pair taken out of the file drains what it holds; new frames of it pass undelayed
    for (const [key, st] of this.pairs) if (!next.has(key) && (st.queues[0].size > 0 || st.queues[1].size > 0)) next.set(`gone:${key}`, st);
    this.pairs = next;
    for (const link of this.links) {
      link.byPeer.clear();
      link.byNic.clear();
      link.fixed = null;
      for (const p of s.pairs) {
        if (p.owner !== link.owner) continue;
        const st = next.get(pairKey(p.owner, p.peer))!;
        const peer = this.nodeByName.get(p.peer)!;
        if (this.nodeByName.get(p.owner)?.kind === 'nic') link.fixed = st;
        else if (peer.kind === 'nic') {
          const host = this.nodeByName.get(peer.host!);
          if (host !== undefined) link.byNic.set(macNumber(peer.mac), { pair: st, hostMac: macNumber(host.mac) });
        } else link.byPeer.set(macNumber(peer.mac), st);
      }
    }
    this.generation++;
  }

  private onFrame(link: Link, dir: number, f: Buffer, len: number, truncated: boolean): void {
    if (truncated) {
      link.drop_truncated++;
      return;
    }
    const peerOff = dir === OUT ? 0 : 6;
    let pair: PairState | undefined;
    if (link.fixed !== null) pair = link.fixed;
    else if ((f[peerOff]! & 1) === 0) {
      const peerMac = macAt(f, peerOff);
      if (link.byNic.size > 0) {
        const inner = innerEthernetOffset(f, len, this.vxlanPort);
        if (inner >= 0) {
          const n = link.byNic.get(macAt(f, inner + peerOff));
          if (n !== undefined && n.hostMac === peerMac) pair = n.pair;
        }
      }
      if (pair === undefined) pair = link.byPeer.get(peerMac);
    }
    const to = link.ports[dir === OUT ? 1 : 0];
    if (pair === undefined) {
      link.passed[dir]!++;
      if (!to.send(f, 0, len)) link.send_error[dir]!++;
      return;
    }
    const q = pair.queues[dir as 0 | 1];
    const c = pair.counters[dir as 0 | 1];
    if (pair.halfMs === 0 && q.size === 0) {
      c.frames++;
      c.bytes += len;
      if (!to.send(f, 0, len)) link.send_error[dir]!++;
      return;
    }
    if (q.size >= this.settings.queueFrames) {
      c.drop_queue_full++;
      return;
    }
    const now = performance.now();
    const at = Math.max(now + pair.halfMs, q.lastRelease);
    const copy = Buffer.allocUnsafe(len);
    f.copy(copy, 0, 0, len);
    q.push(copy, at);
    if (q.size > c.maxQueueFrames) c.maxQueueFrames = q.size;
    if (at < this.timerAt) this.arm(at, now);
  }

  private arm(at: number, now: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.release(), Math.max(0, Math.floor(at - now)));
  }

  private release(): void {
    this.timer = null;
    this.timerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const link of this.links) {
      for (const st of link.byPeer.values()) next = Math.min(next, this.drain(link, st, now));
      for (const n of link.byNic.values()) next = Math.min(next, this.drain(link, n.pair, now));
      if (link.fixed !== null) next = Math.min(next, this.drain(link, link.fixed, now));
    }
    for (const [key, st] of this.pairs) {
      if (!key.startsWith('gone:')) continue;
      const link = this.links.find((l) => l.owner === st.owner);
      if (link !== undefined) next = Math.min(next, this.drain(link, st, now));
      if (st.queues[0].size === 0 && st.queues[1].size === 0) this.pairs.delete(key);
    }
    if (next !== Infinity) this.arm(next, performance.now());
  }

  /** Sends every frame of the pair that is due; returns when the next one is due. */
  private drain(link: Link, st: PairState, now: number): number {
    let next = Infinity;
    for (let dir = 0; dir < 2; dir++) {
      const q = st.queues[dir as 0 | 1];
      const c = st.counters[dir as 0 | 1];
      const to = link.ports[dir === OUT ? 1 : 0];
      while (q.size > 0 && q.peekAt() <= now + RELEASE_EARLY_MS) {
        const late = now - q.peekAt();
        if (late < 0) c.early++;
        else {
          c.lateSumMs += late;
          if (late > c.lateMaxMs) c.lateMaxMs = late;
        }
        const b = q.shift();
        c.frames++;
        c.bytes += b.length;
        if (!to.send(b, 0, b.length)) link.send_error[dir]!++;
      }
      next = Math.min(next, q.peekAt());
    }
    return next;
  }

  status(): unknown {
    const pairs = [...this.pairs.entries()].map(([key, st]) => ({
      owner: st.owner,
      peer: st.peer,
      ms: st.ms,
      removed: key.startsWith('gone:'),
      ...Object.fromEntries(
        DIRS.map((d, i) => {
          const c = st.counters[i as 0 | 1];
          const q = st.queues[i as 0 | 1];
          const sent = c.frames;
          return [
            d,
            {
              frames: c.frames,
              bytes: c.bytes,
              drop_queue_full: c.drop_queue_full,
              queuedFrames: q.size,
              queuedBytes: q.bytes,
              maxQueueFrames: c.maxQueueFrames,
              lateMaxMs: Number(c.lateMaxMs.toFixed(3)),
              lateMeanMs: sent > 0 ? Number((c.lateSumMs / sent).toFixed(3)) : 0,
              early: c.early,
            },
          ];
        }),
      ),
    }));
    const links = this.links.map((l) => {
      const rx = l.ports.map((p) => p.stats());
      return {
        owner: l.owner,
        nodePort: l.nodePortName,
        devPort: l.devPortName,
        passed_out: l.passed[OUT],
        passed_in: l.passed[IN],
        drop_truncated: l.drop_truncated,
        send_error_out: l.send_error[OUT]! + l.ports[1].deferredSendErrors(),
        send_error_in: l.send_error[IN]! + l.ports[0].deferredSendErrors(),
        drop_ring_full_out: rx[0]?.rxKernelDrops ?? 0,
        drop_ring_full_in: rx[1]?.rxKernelDrops ?? 0,
      };
    });
    return {
      generation: this.generation,
      lastReloadError: this.lastReloadError,
      scheduling: { policy: schedPolicy(), demoted: this.demoted },
      loop: {
        delayP99Ms: Number((this.loopDelay.percentile(99) / 1e6).toFixed(3)),
        delayMaxMs: Number((this.loopDelay.max / 1e6).toFixed(3)),
        gcPauses: this.gc.count,
        gcMaxMs: Number(this.gc.maxMs.toFixed(3)),
        gcSumMs: Number(this.gc.sumMs.toFixed(3)),
      },
      queueFrames: this.settings.queueFrames,
      pairs,
      links,
    };
  }

  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.loopDelay.disable();
    this.gcObserver.disconnect();
    for (const l of this.links) for (const p of l.ports) p.close();
  }
}

/** This process's scheduling policy as /proc/self/stat tells it (field 41): SCHED_OTHER, SCHED_FIFO, ... */
export function schedPolicy(): string {
  const names = ['SCHED_OTHER', 'SCHED_FIFO', 'SCHED_RR', 'SCHED_BATCH', 'SCHED_ISO', 'SCHED_IDLE', 'SCHED_DEADLINE'];
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const policy = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[38]);
    return names[policy] ?? `policy ${policy}`;
  } catch {
    return 'unknown';
  }
}

/**
 * The lab starts the device at real-time priority under a real-time CPU limit (prlimit --rttime,
 * scripts/lab/delay.sh). A device that runs that long without sleeping would starve every ordinary
 * process of the lab on a small machine: the kernel's SIGXCPU then makes it drop all its threads to
 * ordinary priority (chrt -a -o), say so in its log and /status, and go on forwarding.
 */
function demoteOnCpuLimit(onDemoted: (how: { at: string; result: string }) => void): void {
  let done = false;
  process.on('SIGXCPU', () => {
    if (done) return;
    done = true;
    const r = spawnSync('chrt', ['-a', '-o', '-p', '0', String(process.pid)], { encoding: 'utf8', timeout: 5000 });
    const result = r.status === 0 ? `now ${schedPolicy()}` : `chrt failed: ${(r.error?.message ?? r.stderr).trim()}`;
    onDemoted({ at: new Date().toISOString(), result });
  });
}

function log(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), event, ...fields })}\n`);
}

function readPlanNodes(file: string): DelayNode[] {
  try {
    return delayNodesFromPlan(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`--plan: cannot read ${file}: ${(e as Error).message}`);
  }
}

function readSettings(file: string, nodes: DelayNode[], owners?: ReadonlySet<string>): DelaySettings | string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    return `cannot read ${file}: ${(e as Error).message}`;
  }
  const r = parseDelays(text, nodes, owners);
  return r.ok ? r.settings : r.errors.map((e) => `${file}: ${e}`).join('\n');
}

// ------------------------------------------------------------------------------------------------

const COMMON: readonly OptionSpec[] = [
  { name: 'plan', value: 'FILE', help: "the lab's plan (runs/lab/NAME/plan.txt): node names and MACs" },
  { name: 'delays', value: 'FILE', help: 'the delays file (YAML: delays: [{ between: [A, B], ms: MS }], queueFrames)' },
  { name: 'help', help: 'this help' },
];

const RUN_COMMAND: CommandSpec = {
  program: 'delay-link run',
  usage: 'delay-link.js run --plan FILE --delays FILE --link OWNER:NODEPORT:DEVPORT ... [--status ADDR] [--vxlan-port N]',
  about:
    'Runs the delay links of a lab (in its fabric namespace): frames between NODEPORT (the owner node) and DEVPORT (the bridge) wait ms/2 per pair and direction. SIGHUP re-reads --delays.',
  options: [
    ...COMMON,
    { name: 'link', value: 'OWNER:NODEPORT:DEVPORT', help: 'one owner node and its two interfaces', repeat: true },
    { name: 'status', value: 'ADDR', help: 'loopback status endpoint (GET /status)', default: `127.0.0.1:${DELAY_STATUS_PORT}` },
    { name: 'owners', value: 'NODE,...', help: "every node with a delay link in the lab (default: this device's)" },
    { name: 'vxlan-port', value: 'N', help: "the fabric's VXLAN port (nic pairs match the inner MAC)", default: '4789' },
  ],
  noPositional: true,
};

async function runRun(args: ParsedArgs): Promise<number> {
  const planFile = one(args, 'plan');
  const delaysFile = one(args, 'delays');
  if (planFile === undefined || delaysFile === undefined) throw new UsageError('--plan and --delays are required');
  const links = (args.values.get('link') ?? []).map((l) => {
    const m = /^([^:]+):([^:]+):([^:]+)$/.exec(l);
    if (m === null) throw new UsageError(`--link: expected OWNER:NODEPORT:DEVPORT, got ${JSON.stringify(l)}`);
    return { owner: m[1]!, nodePort: m[2]!, devPort: m[3]! };
  });
  if (links.length === 0) throw new UsageError('--link: at least one');
  const vxlanPort = Number(one(args, 'vxlan-port'));
  if (!Number.isInteger(vxlanPort) || vxlanPort < 1 || vxlanPort > 65535) throw new UsageError('--vxlan-port: 1..65535');
  const listen = parseListen(one(args, 'status')!);
  if (typeof listen === 'string') throw new UsageError(`--status: ${listen}`);
  const nodes = readPlanNodes(planFile);
  const here = new Set(links.map((l) => l.owner));
  const ownersText = one(args, 'owners');
  const owners = ownersText === undefined ? here : new Set(ownersText.split(',').filter((x) => x !== ''));
  for (const o of here) {
    if (!nodes.some((n) => n.name === o)) throw new UsageError(`--link: ${o} is no node of the plan`);
    if (!owners.has(o)) throw new UsageError(`--link: ${o} is not in --owners`);
  }
  const s = readSettings(delaysFile, nodes, owners);
  if (typeof s === 'string') {
    process.stderr.write(`${s}\n`);
    return 1;
  }
  const dev = new DelayDevice(nodes, s, vxlanPort);
  for (const l of links) dev.addLink(l.owner, l.nodePort, l.devPort);
  const server = await startStatusServer(listen, (path) => (path === '/status' ? dev.status() : undefined));
  demoteOnCpuLimit((how) => {
    dev.demoted = how;
    log('realtime_cpu_limit', { ...how, note: 'ran its real-time CPU limit without sleeping: dropped to ordinary priority' });
  });
  log('started', {
    links: links.map((l) => `${l.owner}:${l.nodePort}:${l.devPort}`),
    pairs: s.pairs,
    generation: dev.generation,
    scheduling: schedPolicy(),
  });
  process.on('SIGHUP', () => {
    const n = readSettings(delaysFile, nodes, owners);
    if (typeof n === 'string') {
      dev.lastReloadError = n;
      log('reload_refused', { reason: n, generation: dev.generation });
      return;
    }
    dev.lastReloadError = null;
    dev.apply(n);
    log('reloaded', { pairs: n.pairs, generation: dev.generation });
  });
  await new Promise<void>((resolve) => {
    const stop = (sig: string) => {
      log('stopping', { signal: sig });
      resolve();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  dev.close();
  server.close();
  return 0;
}

const CHECK_COMMAND: CommandSpec = {
  program: 'delay-link check',
  usage: 'delay-link.js check --plan FILE --delays FILE',
  about:
    'Validates a delays file against a lab plan (every problem at once, each naming its field) and prints the owner nodes, one a line.',
  options: COMMON,
  noPositional: true,
};

function runCheck(args: ParsedArgs): number {
  const planFile = one(args, 'plan');
  const delaysFile = one(args, 'delays');
  if (planFile === undefined || delaysFile === undefined) throw new UsageError('--plan and --delays are required');
  const s = readSettings(delaysFile, readPlanNodes(planFile));
  if (typeof s === 'string') {
    process.stderr.write(`${s}\n`);
    return 1;
  }
  for (const o of delayOwners(s)) process.stdout.write(`${o}\n`);
  return 0;
}

const SET_COMMAND: CommandSpec = {
  program: 'delay-link set',
  usage: 'delay-link.js set --plan FILE --delays FILE --links OWNER,... A B MS',
  about:
    'Rewrites the delays file with the delay between nodes A and B set to MS (ms of round trip, added when new); refuses (exit 1, naming the field) what the running links cannot carry. The caller then sends SIGHUP to the device.',
  options: [...COMMON, { name: 'links', value: 'OWNER,...', help: 'the owners that have a delay link in the running lab' }],
};

function runSet(args: ParsedArgs): number {
  const planFile = one(args, 'plan');
  const delaysFile = one(args, 'delays');
  const linksText = one(args, 'links');
  if (planFile === undefined || delaysFile === undefined || linksText === undefined)
    throw new UsageError('--plan, --delays and --links are required');
  if (args.positional.length !== 3) throw new UsageError('expected A B MS');
  const [a, b, msText] = args.positional as [string, string, string];
  if (!/^\d+(\.\d+)?$/.test(msText)) throw new UsageError(`MS: a number of milliseconds, got ${JSON.stringify(msText)}`);
  const nodes = readPlanNodes(planFile);
  const owners = new Set(linksText.split(',').filter((x) => x !== ''));
  const cur = readSettings(delaysFile, nodes, owners);
  if (typeof cur === 'string') {
    process.stderr.write(`${cur}\n`);
    return 1;
  }
  const r = setDelay(cur, a, b, Number(msText), nodes, owners);
  if (!r.ok) {
    process.stderr.write(`${r.errors.map((e) => `delay ${a} ${b} ${msText}: ${e}`).join('\n')}\n`);
    return 1;
  }
  const tmp = `${delaysFile}.tmp`;
  writeFileSync(tmp, formatDelays(r.settings));
  renameSync(tmp, delaysFile);
  return 0;
}

const USAGE = `usage: delay-link.js run|check|set [options]   (delay-link.js MODE --help)

The lab's delay links (docs/lab.md, "Delay links"): a lab device that adds round-trip time between lab
nodes, per pair, changeable live (scripts/lab.sh up --delays FILE; lab_delay_set A B MS).
  run    the device (lab_up starts it in the fabric namespace)
  check  validate a delays file against a lab plan; prints the nodes that need a delay link
  set    rewrite a delays file with one pair's delay changed (lab_delay_set uses it)
`;

export async function main(argv: readonly string[]): Promise<number> {
  const mode = argv[0];
  if (mode === undefined || mode === '--help' || mode === '-h' || mode === 'help') {
    (mode === undefined ? process.stderr : process.stdout).write(USAGE);
    return mode === undefined ? 2 : 0;
  }
  if (mode === 'run') return runCommandAsync(RUN_COMMAND, argv.slice(1), runRun);
  if (mode === 'check') return runCommand(CHECK_COMMAND, argv.slice(1), runCheck);
  if (mode === 'set') return runCommand(SET_COMMAND, argv.slice(1), runSet);
  process.stderr.write(`delay-link: unknown mode ${JSON.stringify(mode)}; modes: run, check, set (see --help)\n`);
  return 2;
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (rc) => {
      process.exitCode = rc;
    },
    (e) => {
      process.stderr.write(`delay-link: ${(e as Error).stack}\n`);
      process.exitCode = 1;
    },
  );
}
