#!/usr/bin/env node
// The host agent's one flow table (issue 16: east-west, the return path and outbound NAT in one table),
// measured without I/O. Run after `npx tsc -p tsconfig.json`:
//   node --expose-gc dist/scripts/bench/host-flow-table.js [--dsr N] [--snat N] [--ew N] [--rehome N] [--json]
// Prints:
// - memory with --dsr return-path entries, --snat outbound NAT flows (two entries each, through the
//   engine's out4) and --ew east-west entries, for the one table (as the daemon runs now) and for the
//   layout before it (the engine on a table of its own beside the host's): the tables' array bytes, the
//   engine's slot arrays, and the array-buffer growth node reports, per flow;
// - the cost of carrying outbound NAT's flows into a fresh table (SnatEngine.rehome, what carryEwState
//   does when a policy changes the MUXes or targets, or a bound) at --rehome flows, and of carrying as
//   many return-path entries (carryEwState's copy), median of 5.
// Numbers for docs/design.md ("One host flow table"); nothing is asserted.
import { loadavg as loadavgOs } from 'node:os';
import { performance } from 'node:perf_hooks';
import { ip } from '../../shared/addr.js';
import { pkt } from '../../shared/packet-builder.js';
import { TCP_SYN } from '../../shared/tcp.js';
import { FLOW_DSR, FLOW_TO_MUX, HostFlowTable, KEY_SPACE_DSR } from '../../host-agent/flow-table.js';
import { SnatEngine, type SnatPortRange } from '../../host-agent/snat.js';

const L3 = 14;
const HELP = `usage: node --expose-gc dist/scripts/bench/host-flow-table.js [--dsr N] [--snat N] [--ew N] [--rehome N] [--json]
  --dsr N      return-path entries for the memory measure (default 400000)
  --snat N     outbound NAT flows for the memory measure (default 250000; two entries each)
  --ew N       east-west entries for the memory measure (default 100000)
  --rehome N   outbound NAT flows carried into a fresh table (default 100000)
  --json       one JSON line instead of the table
`;

interface Opts {
  dsr: number;
  snat: number;
  ew: number;
  rehome: number;
  json: boolean;
}

function parse(argv: readonly string[]): Opts {
  const o: Opts = { dsr: 400_000, snat: 250_000, ew: 100_000, rehome: 100_000, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') {
      process.stdout.write(HELP);
      process.exit(0);
    } else if (a === '--json') o.json = true;
    else if (a === '--dsr' || a === '--snat' || a === '--ew' || a === '--rehome') {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < 0 || v > 10_000_000) {
        process.stderr.write(`${a} must be an integer 0..10000000\n${HELP}`);
        process.exit(2);
      }
      o[a.slice(2) as 'dsr' | 'snat' | 'ew' | 'rehome'] = v;
    } else {
      process.stderr.write(`unknown argument ${String(a)}\n${HELP}`);
      process.exit(2);
    }
  }
  return o;
}

/** Enough frontend ports for `flows` flows: 64,512 ports a frontend IP. */
function ranges(flows: number): SnatPortRange[] {
  const out: SnatPortRange[] = [];
  for (let i = 0; out.length * 64512 < Math.max(1, flows); i++)
    out.push({ ip: ip(`203.0.113.${100 + i}`).words, first: 1024, last: 65535 });
  return out;
}

function engineOn(table: HostFlowTable, flows: number): SnatEngine {
  const e = new SnatEngine(table, flows + 16);
  e.setNic(0, { vni: 5001, idleS: 240, tcpResetOnIdle: false, tcp: true, udp: true, ranges4: ranges(flows), ranges6: [] });
  return e;
}

/** `n` SNAT flows through the engine: a SYN each from 192.0.2.11, one remote endpoint per flow. */
function fillSnat(e: SnatEngine, n: number): void {
  const f = pkt().eth().ipv4({ src: '192.0.2.11', dst: '198.51.100.5' }).tcp({ sport: 1, dport: 9000, flags: TCP_SYN }).build();
  for (let i = 0; i < n; i++) {
    f[L3 + 20] = (i >>> 8) & 0xff; // DIP port: the low 16 bits
    f[L3 + 21] = i & 0xff;
    f[L3 + 19] = (i >>> 16) & 0xff; // remote 198.51.100.x: the rest
    if (e.out4(f, L3, f.length, 0, 100) < 0) throw new Error(`snat flow ${i} refused`);
  }
}

/** `n` return-path entries (the reply's 5-tuple, as dsr-flows.ts keys them) and `ew` east-west entries. */
function fillHost(t: HostFlowTable, dsr: number, ew: number): void {
  for (let i = 0; i < dsr; i++) {
    t.setKey4(5001, 0xc000020a, (0x0a000000 + Math.floor(i / 60000)) >>> 0, 6, 80, 1024 + (i % 60000), KEY_SPACE_DSR);
    if (!t.insert(FLOW_DSR, 80, 1000)) throw new Error(`dsr entry ${i} refused`);
  }
  for (let i = 0; i < ew; i++) {
    t.setKey4(5001, (0x0b000000 + Math.floor(i / 60000)) >>> 0, 0xc6130064, 6, 1024 + (i % 60000), 7000);
    if (!t.insert(FLOW_TO_MUX, 0, 1000)) throw new Error(`east-west entry ${i} refused`);
  }
}

const gc = (globalThis as { gc?: () => void }).gc;
const mem = () => {
  gc?.();
  gc?.();
  return process.memoryUsage().arrayBuffers;
};

function measure(o: Opts, one: boolean): Record<string, number> {
  const m0 = mem();
  const entries = o.dsr + o.ew + 2 * o.snat + 16;
  const host = new HostFlowTable(one ? entries : o.dsr + o.ew + 16);
  const snatTable = one ? host : new HostFlowTable(2 * o.snat + 16);
  const e = engineOn(snatTable, o.snat);
  fillHost(host, o.dsr, o.ew);
  fillSnat(e, o.snat);
  const m1 = mem();
  const flows = o.dsr + o.ew + o.snat;
  const tableBytes = host.table.bytes + (one ? 0 : snatTable.table.bytes);
  return {
    flows,
    slots: host.table.capacity + (one ? 0 : snatTable.table.capacity),
    tableMB: tableBytes / 1e6,
    slotArraysMB: e.bytes / 1e6,
    bytesPerFlow: (tableBytes + e.bytes) / flows,
    arrayBuffersPerFlow: (m1 - m0) / flows,
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Wall time and CPU time (user + system, this process: less sensitive to a busy machine) of each carry, ms. */
function timeRehome(n: number): { snatMs: number; dsrMs: number; snatCpuMs: number; dsrCpuMs: number } {
  const snat: number[] = [];
  const dsr: number[] = [];
  const snatCpu: number[] = [];
  const dsrCpu: number[] = [];
  const cpuMs = (c: NodeJS.CpuUsage) => (c.user + c.system) / 1000;
  for (let r = 0; r < 5; r++) {
    const t = new HostFlowTable(2 * n + 16);
    const e = engineOn(t, n);
    fillSnat(e, n);
    const fresh = new HostFlowTable(2 * n + 16);
    fresh.table.reserve(2 * n); // as carryEwState does before it carries
    let c0 = process.cpuUsage();
    let t0 = performance.now();
    const ended = e.rehome(fresh);
    snat.push(performance.now() - t0);
    snatCpu.push(cpuMs(process.cpuUsage(c0)));
    if (ended !== 0 || fresh.size !== 2 * n) throw new Error(`rehome carried ${fresh.size} entries of ${2 * n}, ended ${ended}`);
    // the return path's copy as carryEwState does it: forEach + setKeyWords + insert
    const h = new HostFlowTable(n + 16);
    fillHost(h, n, 0);
    const to = new HostFlowTable(n + 16);
    to.table.reserve(n);
    c0 = process.cpuUsage();
    t0 = performance.now();
    h.table.forEach(0, (k, v, exp) => {
      to.setKeyWords(k);
      to.insert(v >>> 24, v & 0xffffff, exp);
    });
    dsr.push(performance.now() - t0);
    dsrCpu.push(cpuMs(process.cpuUsage(c0)));
    if (to.size !== n) throw new Error(`dsr copy carried ${to.size} of ${n}`);
  }
  return { snatMs: median(snat), dsrMs: median(dsr), snatCpuMs: median(snatCpu), dsrCpuMs: median(dsrCpu) };
}

function main(): void {
  const o = parse(process.argv.slice(2));
  const one = measure(o, true);
  const two = measure(o, false);
  const rh = o.rehome > 0 ? timeRehome(o.rehome) : { snatMs: 0, dsrMs: 0, snatCpuMs: 0, dsrCpuMs: 0 };
  const r = { ...o, one, separate: two, ...rh, gcExposed: gc !== undefined, load: loadavg() };
  if (o.json) {
    process.stdout.write(`${JSON.stringify(r)}\n`);
    return;
  }
  const row = (name: string, m: Record<string, number>) =>
    `${name.padEnd(10)} ${String(m.slots).padStart(9)} slots  tables ${m.tableMB!.toFixed(1).padStart(6)} MB  slot arrays ${m.slotArraysMB!.toFixed(1).padStart(5)} MB  ` +
    `${m.bytesPerFlow!.toFixed(1).padStart(6)} B/flow  arrayBuffers +${m.arrayBuffersPerFlow!.toFixed(1)} B/flow`;
  process.stdout.write(
    `${o.dsr} return-path + ${o.ew} east-west entries + ${o.snat} outbound NAT flows (${one.flows} flows)\n` +
      `${row('one table', one)}\n${row('separate', two)}\n` +
      `carry into a fresh table, median of 5: ${o.rehome} outbound NAT flows (rehome) ${rh.snatMs.toFixed(1)} ms (CPU ${rh.snatCpuMs.toFixed(1)} ms), ` +
      `${o.rehome} return-path entries (carryEwState's copy) ${rh.dsrMs.toFixed(1)} ms (CPU ${rh.dsrCpuMs.toFixed(1)} ms); load ${r.load}\n`,
  );
}

function loadavg(): string {
  return loadavgOs()
    .map((x) => x.toFixed(1))
    .join(' ');
}

main();
