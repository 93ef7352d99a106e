// In-process measurements for scripts/bench.sh (no namespaces, no root):
//
//   node --expose-gc dist/scripts/bench/micro.js [--quick] [--json FILE] [--config FILE]
//
// 1. Pure data-plane cost: ns per packet of processPacket (MUX), processInbound and processOutbound (host
//    agent) on frames built with the project's packet builder from the lab config (examples/lab.yaml),
//    per path: TCP/UDP, IPv4/IPv6, a new flow (a flow-table miss, a Maglev lookup and an insert) or an
//    existing one (a hit), 64-byte and 1400-byte frames. Every path is warmed up first (all of them,
//    so the functions are optimized for the mix, as in a daemon), then each is timed in a tight loop,
//    several rounds interleaved, median per path. The host agent rewrites frames in place, so each of
//    its iterations first restores the frame (a 64..1400-byte copy); that copy is timed alone and
//    subtracted ("net"), both figures are reported.
// 2. Memory per flow: a MUX flow table (mux/flow-table.ts) filled with 1,000,000 IPv4 flows (and,
//    separately, 1,000,000 IPv6 flows): the table's own bytes (its typed arrays) and the process's RSS
//    and ArrayBuffer growth, after a garbage collection; insert and lookup ns per flow.
// Times are CPU time of the process per iteration (process.cpuUsage; the wall clock is reported too): on a
// shared machine the wall clock also counts waiting for a CPU.
// --quick: fewer iterations and 100,000 flows (the smoke run: checks the harness, not the numbers).
// --paths-only: part 1 alone (no flow-table memory); --rounds N: timed rounds per path (default 5).
// --parts: the MUX's main path (udp4, an existing flow) taken apart: each step timed alone (the parsers,
// the header checksum check, the hash, the maps, the flow table, counter increments, the payload copy,
// the outer checksum), the form the data plane uses next to the plain one it replaced, to show where
// processPacket's time goes (docs/performance.md).
// --maglev-only: one Maglev build of 10, 100 and 1000 backends at M = 65537 and 655373, written in the
// shape of scripts/bench/maglev.ts's JSON (the smoke run's stand-in for it; the full bench runs that).
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseConfig, formatConfigErrors, type SlbxConfig } from '../../shared/config.js';
import { pkt } from '../../shared/packet-builder.js';
import { hashFlowV4, hashFlowV6 } from '../../shared/flow-hash.js';
import { processPacket } from '../../mux/data-plane.js';
import { FlowTable } from '../../mux/flow-table.js';
import { buildMaglevTable } from '../../shared/maglev.js';
import { newEthernetHeader, parseEthernet } from '../../shared/ethernet.js';
import { newIpv4Header, parseIpv4 } from '../../shared/ipv4.js';
import { newUdpHeader, parseUdp } from '../../shared/udp.js';
import { finishChecksum, sumBytes } from '../../shared/checksum.js';
import { copyPayload, ipv4ChecksumOk, readEtherType } from '../../shared/hot-path.js';
import { CLIENT, FRAMES, MUX_MAC, ROUTER_MAC, VIP, forwardVerdict, newMux, pathCases, payload, type Case } from './paths.js';

export interface PathResult {
  plane: Case['plane'];
  path: string;
  /** ns per packet (CPU time), median of the rounds (host agent: with the restore copy). */
  ns: number;
  /** the same from the wall clock */
  wallNs: number;
  nsMin: number;
  nsMax: number;
  /** host agent: the restore copy alone, and ns minus it. */
  copyNs?: number;
  netNs?: number;
  iterations: number;
  rounds: number;
}

function usage(msg: string | null): never {
  if (msg === null) {
    process.stdout.write(
      `usage: node --expose-gc dist/scripts/bench/micro.js [--quick | --parts | --maglev-only] [--paths-only] [--rounds N] [--json FILE] [--config FILE]\n`,
    );
    process.exit(0);
  }
  process.stderr.write(
    `micro.js: ${msg}\nusage: node --expose-gc dist/scripts/bench/micro.js [--quick | --parts | --maglev-only] [--paths-only] [--rounds N] [--json FILE] [--config FILE]\n`,
  );
  process.exit(2);
}

function loadConfig(file: string): SlbxConfig {
  const r = parseConfig(readFileSync(file, 'utf8'), file);
  if (!r.ok) throw new Error(formatConfigErrors(r.errors, file));
  return r.config;
}

let sink = 0;
let lastWallNs = 0;
/**
 * ns per iteration of fn, from the process's CPU time (user + system: on a shared machine the wall clock
 * also counts the time the process waited for a CPU); the wall-clock figure is left in lastWallNs.
 */
function timeLoop(fn: (i: number) => number, iters: number, start: number): number {
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  let s = 0;
  for (let i = 0; i < iters; i++) s += fn(start + i);
  const c = process.cpuUsage(c0);
  lastWallNs = Number(process.hrtime.bigint() - t0) / iters;
  sink += s;
  return ((c.user + c.system) * 1000) / iters;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function measurePaths(config: SlbxConfig, quick: boolean, roundsArg: number | null): PathResult[] {
  const cases = pathCases(config);
  for (const c of cases) {
    const v = c.step(0);
    const want = forwardVerdict(c);
    if (v !== want) throw new Error(`${c.plane} ${c.path}: verdict ${v}, expected a forward (the bench's frames are wrong)`);
  }
  const iters = quick ? 50_000 : 400_000;
  const rounds = roundsArg ?? (quick ? 2 : 5);
  const warm = quick ? 20_000 : 300_000;
  for (let w = 0; w < 2; w++)
    for (const c of cases) {
      timeLoop(c.step, warm, 1);
      if (c.copy) timeLoop(c.copy, warm, 1);
    }
  const times = cases.map(() => [] as number[]);
  const walls = cases.map(() => [] as number[]);
  const copies = cases.map(() => [] as number[]);
  let at = FRAMES * 16;
  for (let r = 0; r < rounds; r++) {
    cases.forEach((c, k) => {
      times[k]!.push(timeLoop(c.step, iters, at));
      walls[k]!.push(lastWallNs);
      if (c.copy) copies[k]!.push(timeLoop(c.copy, iters, at));
      at += iters;
    });
  }
  const r1 = (x: number) => Math.round(x * 10) / 10;
  return cases.map((c, k) => {
    const ns = median(times[k]!);
    const res: PathResult = {
      plane: c.plane,
      path: c.path,
      ns: r1(ns),
      wallNs: r1(median(walls[k]!)),
      nsMin: r1(Math.min(...times[k]!)),
      nsMax: r1(Math.max(...times[k]!)),
      iterations: iters,
      rounds,
    };
    if (c.copy) {
      const cp = median(copies[k]!);
      res.copyNs = r1(cp);
      res.netNs = r1(Math.max(0, ns - cp));
    }
    return res;
  });
}

export interface FlowMemory {
  family: 4 | 6;
  flows: number;
  capacity: number;
  tableBytes: number;
  bytesPerFlow: number;
  rssDeltaBytes: number;
  rssPerFlow: number;
  arrayBuffersDeltaBytes: number;
  insertNsPerFlow: number;
  lookupNsPerFlow: number;
}

function gc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (g) {
    g();
    g();
  }
}

function flowMemory(family: 4 | 6, n: number): FlowMemory {
  gc();
  const m0 = process.memoryUsage();
  const limit = { max: n * 2, count: 0 };
  const t = new FlowTable(family === 4 ? 4 : 10, limit);
  const k = t.key;
  const ins0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const src = (0xc6130000 + (i >>> 16)) >>> 0;
    const ports = (((1024 + (i & 0xffff)) << 16) | 7) >>> 0;
    let h: number;
    if (family === 4) {
      k[0] = src;
      k[1] = 0xcb00710a;
      k[2] = 17;
      k[3] = ports;
      h = hashFlowV4(src, 0xcb00710a, 17, 1024 + (i & 0xffff), 7, 5, 0x736c6278);
    } else {
      k[0] = 0x20010db8;
      k[1] = 0xc;
      k[2] = 0;
      k[3] = src;
      k[4] = 0x20010db8;
      k[5] = 0xff;
      k[6] = 0;
      k[7] = 0x10;
      k[8] = 17;
      k[9] = ports;
      h = hashFlowV6(k.subarray(0, 4), 0, k.subarray(4, 8), 0, 17, 1024 + (i & 0xffff), 7, 5, 0x736c6278);
    }
    if (!t.insert(h, i & 0xff, 1000)) throw new Error('flow table refused an insert');
  }
  const insNs = Number(process.hrtime.bigint() - ins0) / n;
  gc();
  const m1 = process.memoryUsage();
  // lookups of every flow (a hit each)
  const lk0 = process.hrtime.bigint();
  let hits = 0;
  for (let i = 0; i < n; i++) {
    const src = (0xc6130000 + (i >>> 16)) >>> 0;
    const ports = (((1024 + (i & 0xffff)) << 16) | 7) >>> 0;
    let h: number;
    if (family === 4) {
      k[0] = src;
      k[1] = 0xcb00710a;
      k[2] = 17;
      k[3] = ports;
      h = hashFlowV4(src, 0xcb00710a, 17, 1024 + (i & 0xffff), 7, 5, 0x736c6278);
    } else {
      k[0] = 0x20010db8;
      k[1] = 0xc;
      k[2] = 0;
      k[3] = src;
      k[4] = 0x20010db8;
      k[5] = 0xff;
      k[6] = 0;
      k[7] = 0x10;
      k[8] = 17;
      k[9] = ports;
      h = hashFlowV6(k.subarray(0, 4), 0, k.subarray(4, 8), 0, 17, 1024 + (i & 0xffff), 7, 5, 0x736c6278);
    }
    if (t.lookup(h, 1, 1000) >= 0) hits++;
  }
  const lkNs = Number(process.hrtime.bigint() - lk0) / n;
  if (hits !== n) throw new Error(`flow table lost entries: ${hits} of ${n} found`);
  const r = (x: number) => Math.round(x * 10) / 10;
  const res: FlowMemory = {
    family,
    flows: t.size,
    capacity: t.capacity,
    tableBytes: t.bytes,
    bytesPerFlow: r(t.bytes / n),
    rssDeltaBytes: m1.rss - m0.rss,
    rssPerFlow: r((m1.rss - m0.rss) / n),
    arrayBuffersDeltaBytes: m1.arrayBuffers - m0.arrayBuffers,
    insertNsPerFlow: r(insNs),
    lookupNsPerFlow: r(lkNs),
  };
  t.clear();
  return res;
}

/**
 * Each step of the MUX's udp4 existing-flow path timed alone, the form the data plane uses next to the
 * plain one it replaced (docs/performance.md); returns [name, ns] rows. Every step is called through
 * the same loop as an empty step, whose time (the first row) is in every row.
 */
function measureParts(config: SlbxConfig): [string, number][] {
  const ctx = newMux(config);
  const frames = Array.from({ length: FRAMES }, (_, k) =>
    pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: CLIENT, dst: VIP })
      .udp({ sport: 1024 + k, dport: 7, checksum: 'zero' })
      .payload(payload(64, 42))
      .build(),
  );
  const eth = newEthernetHeader();
  const ip4 = newIpv4Header();
  const udp = newUdpHeader();
  const out = Buffer.alloc(2048);
  const outView = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const cv = ctx.counters.values;
  const C = ctx.counters.index;
  // the counters' index as it was built before, one name at a time: V8 made that a dictionary (when it
  // was the first object to get those names; here the index built since has laid a fast path for
  // them, so the dictionary is made explicitly: an object without a prototype starts as one)
  const dict = Object.create(null) as Record<string, number>;
  ctx.counters.names.forEach((n, i) => {
    dict[n] = i;
  });
  // (picked per call from a two-element array, so that the compiler cannot fold a constant index away)
  const frozenDict = Object.freeze(dict) as typeof C;
  const dictIndex = [frozenDict, frozenDict];
  const fastIndex = [C, C];
  const vips = ctx.tables.vips4;
  const vipAddr = frames[0]!.readUInt32BE(30);
  const vip = vips.get(vipAddr)!;
  const ruleKey = (17 << 16) | 7;
  const m = FRAMES - 1;
  const keyA = new Uint32Array(4);
  const keyB = new Uint32Array(4);
  const host = [...ctx.tables.hosts.values()][0]!;
  // the flows the lookup step finds: every frame's 5-tuple, recorded once
  for (let k = 0; k <= m; k++) {
    const f = frames[k]!;
    processPacket(f, f.length, ctx);
    processPacket(f, f.length, ctx);
  }
  for (let k = 0; k <= m; k++) parseIpv4(frames[k]!, 14, ip4, 64);
  const steps: [string, (i: number) => number][] = [
    ['(the loop and an empty call: in every row)', () => 0],
    [
      'processPacket, the whole path',
      (i) => {
        const f = frames[i & m]!;
        return processPacket(f, f.length, ctx);
      },
    ],
    ['parseEthernet (copies both MACs)', (i) => parseEthernet(frames[i & m]!, 0, eth, 64)],
    ['readEtherType (used)', (i) => readEtherType(frames[i & m]!, 0, eth, 64)],
    ['parseIpv4', (i) => parseIpv4(frames[i & m]!, 14, ip4, 64)],
    ['IPv4 header check, sumBytes over 20 bytes', (i) => finishChecksum(sumBytes(frames[i & m]!, 14, 20, 0))],
    ['IPv4 header check, ipv4ChecksumOk on the parsed fields (used)', (i) => (ipv4ChecksumOk(frames[i & m]!, 14, ip4) ? 1 : 0)],
    ['parseUdp', (i) => parseUdp(frames[i & m]!, 34, udp, 64)],
    ['hashFlowV4 (5-tuple)', (i) => hashFlowV4(0xc6336400, vipAddr, 17, 1024 + (i & m), 7, 5, 0x736c6278)],
    ['tables.vips4.get', () => (vips.get(vipAddr) === undefined ? 0 : 1)],
    ['vip.rules.get', () => (vip.rules.get(ruleKey) === undefined ? 0 : 1)],
    [
      'flow table lookup, a hit (key words written first)',
      (i) => {
        const k = ctx.flows4.key;
        k[0] = 0xc6336400;
        k[1] = vipAddr;
        k[2] = 17;
        k[3] = (((1024 + (i & m)) << 16) | 7) >>> 0;
        return ctx.flows4.lookup(hashFlowV4(0xc6336400, vipAddr, 17, 1024 + (i & m), 7, 5, config.hashSeed), 1, 100) >= 0 ? 1 : 0;
      },
    ],
    [
      'a 4-word key copy, Uint32Array.set() (was on every packet)',
      () => {
        keyB.set(keyA);
        return 0;
      },
    ],
    [
      'a 4-word key copy, word loop (now on a main-table miss only)',
      () => {
        for (let k = 0; k < 4; k++) keyB[k] = keyA[k]!;
        return 0;
      },
    ],
    [
      '5 counter increments, dictionary-mode index',
      (i) => {
        const D = dictIndex[i & 1]!;
        cv[D.rx_packets]!++;
        cv[D.rx_bytes]! += 64;
        cv[D.flow_hit]!++;
        cv[D.tx_packets]!++;
        cv[D.tx_bytes]! += 114;
        return 0;
      },
    ],
    [
      '5 counter increments, the fast-mode index (used)',
      (i) => {
        const F = fastIndex[i & 1]!;
        cv[F.rx_packets]!++;
        cv[F.rx_bytes]! += 64;
        cv[F.flow_hit]!++;
        cv[F.tx_packets]!++;
        cv[F.tx_bytes]! += 114;
        return 0;
      },
    ],
    [
      '50-byte copy, out.set(frame.subarray())',
      (i) => {
        out.set(frames[i & m]!.subarray(14, 64), 64);
        return 0;
      },
    ],
    [
      '50-byte copy, copyPayload (32-bit words; used)',
      (i) => {
        copyPayload(frames[i & m]!, 14, out, outView, 64, 50);
        return 0;
      },
    ],
    [
      'outer IPv4 checksum, sumBytes over the 20 bytes written',
      (i) => {
        out[18] = i & 0xff;
        return finishChecksum(sumBytes(out, 14, 20, 0));
      },
    ],
    [
      'outer IPv4 checksum, from the shares summed in advance (used)',
      (i) => finishChecksum(ctx.outerSum4 + host.outerSum4 + 114 + (i & 0xffff)),
    ],
  ];
  const iters = 1_000_000;
  for (const [, fn] of steps) timeLoop(fn, 200_000, 0);
  const rows: [string, number][] = [];
  for (const [name, fn] of steps) {
    const xs = [timeLoop(fn, iters, 0), timeLoop(fn, iters, iters), timeLoop(fn, iters, 2 * iters)];
    rows.push([name, Math.round(median(xs) * 10) / 10]);
  }
  return rows;
}

function main(): void {
  const argv = process.argv.slice(2);
  let quick = false;
  let maglevOnly = false;
  let parts = false;
  let pathsOnly = false;
  let rounds: number | null = null;
  let json: string | null = null;
  let cfgFile = fileURLToPath(new URL('../../../examples/lab.yaml', import.meta.url));
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--help' || a === '-h') usage(null);
    else if (a === '--quick') quick = true;
    else if (a === '--maglev-only') maglevOnly = true;
    else if (a === '--parts') parts = true;
    else if (a === '--paths-only') pathsOnly = true;
    else if (a === '--rounds') {
      rounds = Number(argv[++i]);
      if (!Number.isInteger(rounds) || rounds < 1) usage('--rounds needs a positive integer');
    } else if (a === '--json') json = argv[++i] ?? usage('--json needs a file');
    else if (a === '--config') cfgFile = argv[++i] ?? usage('--config needs a file');
    else usage(`unknown argument ${JSON.stringify(a)}`);
  }
  if (parts) {
    const rows = measureParts(loadConfig(cfgFile));
    process.stdout.write(`the MUX's udp4 existing-flow path, step by step (CPU ns per call, node ${process.version})\n`);
    for (const [name, ns] of rows) process.stdout.write(`${ns.toFixed(1).padStart(8)} ns  ${name}\n`);
    if (json !== null)
      writeFileSync(
        json,
        `${JSON.stringify({ bench: 'micro-parts', node: process.version, rows: rows.map(([name, ns]) => ({ name, ns })) }, null, 2)}\n`,
      );
    return;
  }
  if (maglevOnly) {
    const rows = [];
    for (const size of [65537, 655373]) {
      for (const n of [10, 100, 1000]) {
        const members = Array.from({ length: n }, (_, i) => ({ id: `backend-${i}`, weight: 50 }));
        buildMaglevTable(members, size);
        const t0 = process.hrtime.bigint();
        buildMaglevTable(members, size);
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        rows.push({ size, members: n, weights: 'equal', reps: 1, medianMs: ms, minMs: ms, maxMs: ms });
        process.stdout.write(`maglev M=${size} ${n} backends: ${ms.toFixed(2)} ms (one build)\n`);
      }
    }
    if (json !== null) writeFileSync(json, `${JSON.stringify({ bench: 'maglev', quick: true, node: process.version, rows }, null, 2)}\n`);
    return;
  }
  if ((globalThis as { gc?: unknown }).gc === undefined) process.stderr.write('micro.js: run with --expose-gc for exact memory figures\n');
  const config = loadConfig(cfgFile);
  const paths = measurePaths(config, quick, rounds);
  const flows = quick ? 100_000 : 1_000_000;
  const memory = pathsOnly ? [] : [flowMemory(4, flows), flowMemory(6, flows)];
  const out = { bench: 'micro', node: process.version, quick, config: cfgFile, paths, flowMemory: memory, sink: sink % 2 };
  const pad = (s: string, n: number) => s.padEnd(n);
  process.stdout.write(`data-plane ns per packet (node ${process.version}${quick ? ', --quick' : ''})\n`);
  for (const p of paths) {
    process.stdout.write(
      `  ${pad(p.plane, 9)}${pad(p.path, 30)}${p.ns.toFixed(1).padStart(8)} ns  (${p.nsMin.toFixed(1)}-${p.nsMax.toFixed(1)}; wall ${p.wallNs.toFixed(1)})${p.netNs !== undefined ? `  net of the restore copy ${p.netNs.toFixed(1)} ns` : ''}\n`,
    );
  }
  for (const m of memory) {
    process.stdout.write(
      `flow table, IPv${m.family}, ${m.flows} flows: ${m.tableBytes} bytes in the table (${m.bytesPerFlow} per flow, capacity ${m.capacity}), RSS +${m.rssDeltaBytes} (${m.rssPerFlow} per flow); insert ${m.insertNsPerFlow} ns, lookup ${m.lookupNsPerFlow} ns per flow\n`,
    );
  }
  if (json !== null) writeFileSync(json, `${JSON.stringify(out, null, 2)}\n`);
}

main();
