// Outbound NAT in the host agent (host-agent/snat.ts), measured without I/O. Run after `npx tsc -p tsconfig.json`:
//   node --expose-gc dist/scripts/bench/snat.js [--flows N] [--json FILE]
// Prints: new flows per second (a SYN each, a free port found and both entries inserted), the
// per-packet cost of translating an existing flow's packet out and its reply back (IPv4 TCP), a new
// flow's cost without and with the flow journal a daemon with --state-dir attaches (rounds alternating
// in this one process, medians; the journal's records encoded every 1,000 flows, as at the end of an
// event-loop turn, and timed apart: times and CRC-32s; the write(2) left to
// scripts/bench/flow-journal.js) and its bytes per SYN, and the
// memory per SNAT flow with N live flows (default 1,000,000): the engine's slot arrays and the flow
// table's arrays, counted from their byte lengths, and the heap and array-buffer growth as node
// reports it. Numbers for docs/outbound.md; nothing is asserted.
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { ip } from '../../shared/addr.js';
import { pkt } from '../../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../../shared/tcp.js';
import { HostFlowTable } from '../../host-agent/flow-table.js';
import { SnatEngine, type SnatPortRange } from '../../host-agent/snat.js';
import { FlowJournalBuffer } from '../../host-agent/flow-journal.js';

const L3 = 14;
const HELP = `usage: node --expose-gc dist/scripts/bench/snat.js [--flows N] [--json FILE]
  --flows N    live flows for the memory measure (default 1000000)
  --json FILE  also write the results as JSON
`;

function args(argv: readonly string[]): { flows: number; json: string | null } {
  let flows = 1_000_000;
  let json: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') {
      process.stdout.write(HELP);
      process.exit(0);
    } else if (a === '--flows') flows = Number(argv[++i]);
    else if (a === '--json') json = argv[++i] ?? null;
    else {
      process.stderr.write(`unknown argument ${String(a)}\n${HELP}`);
      process.exit(2);
    }
  }
  if (!Number.isInteger(flows) || flows < 1000 || flows > 10_000_000) {
    process.stderr.write(`--flows must be an integer 1000..10000000\n${HELP}`);
    process.exit(2);
  }
  return { flows, json };
}

/** Enough frontend ports for `flows` flows toward one remote endpoint each: 64,512 ports a frontend IP. */
function ranges(flows: number): SnatPortRange[] {
  const out: SnatPortRange[] = [];
  for (let i = 0; out.length * 64512 < flows; i++) out.push({ ip: ip(`203.0.113.${100 + i}`).words, first: 1024, last: 65535 });
  return out;
}

function engine(flows: number): SnatEngine {
  const e = new SnatEngine(new HostFlowTable(flows * 2 + 16), flows + 16);
  e.setNic(0, { vni: 5001, idleS: 240, tcpResetOnIdle: false, tcp: true, udp: true, ranges4: ranges(flows), ranges6: [] });
  return e;
}

const gc = (globalThis as { gc?: () => void }).gc;

function main(): void {
  const o = args(process.argv.slice(2));
  const results: Record<string, number> = {};

  // new flows: distinct DIP ports and remote ports (SYN each)
  {
    const n = 200_000;
    const e = engine(n);
    const syn = pkt().eth().ipv4({ src: '192.0.2.11', dst: '198.51.100.5' }).tcp({ sport: 1, dport: 9000, flags: TCP_SYN }).build();
    const f = Buffer.from(syn);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      syn.copy(f);
      f[L3 + 20] = (i >>> 8) & 0xff; // DIP port
      f[L3 + 21] = i & 0xff;
      f[L3 + 19] = (i >>> 16) & 0xff; // remote 198.51.100.x
      if (e.out4(f, L3, f.length, 0, 100) < 0) throw new Error(`new flow ${i} refused`);
    }
    const ms = performance.now() - t0;
    results['newFlowsPerS'] = Math.round(n / (ms / 1000));
  }

  // a new flow without and with the flow journal (host-agent/flow-journal.ts), alternating rounds
  {
    const n = 20_000;
    const syn = pkt().eth().ipv4({ src: '192.0.2.11', dst: '198.51.100.5' }).tcp({ sport: 1, dport: 9000, flags: TCP_SYN }).build();
    const f = Buffer.from(syn);
    let bytesPerFlow = 0;
    const encodeNs: number[] = [];
    const round = (journal: boolean): number => {
      const e = engine(n);
      const j = journal ? new FlowJournalBuffer() : null;
      e.journal = j;
      let bytes = 0;
      let encMs = 0;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) {
        syn.copy(f);
        f[L3 + 20] = (i >>> 8) & 0xff;
        f[L3 + 21] = i & 0xff;
        f[L3 + 19] = (i >>> 16) & 0xff;
        if (e.out4(f, L3, f.length, 0, 100) < 0) throw new Error(`new flow ${i} refused`);
        if (j !== null && j.pending >= 1000) {
          const a = performance.now();
          bytes += j.encode(100, 0).length;
          encMs += performance.now() - a;
        }
      }
      if (j !== null) {
        const a = performance.now();
        bytes += j.encode(100, 0).length;
        encMs += performance.now() - a;
        bytesPerFlow = bytes / n;
        encodeNs.push((encMs * 1e6) / n);
      }
      // the data plane's part: the encoding (the end of the turn's) apart
      return ((performance.now() - t0 - encMs) * 1e6) / n;
    };
    const without: number[] = [];
    const withJ: number[] = [];
    for (let r = 0; r < 15; r++) {
      without.push(round(false));
      withJ.push(round(true));
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    results['newFlowNs'] = Math.round(med(without));
    results['newFlowNsJournal'] = Math.round(med(withJ));
    results['journalEncodeNsPerFlow'] = Math.round(med(encodeNs));
    results['journalBytesPerSyn'] = bytesPerFlow;
  }

  // per packet on an existing flow: out and back
  {
    const e = engine(1000);
    const out = pkt()
      .eth()
      .ipv4({ src: '192.0.2.11', dst: '198.51.100.5' })
      .tcp({ sport: 40000, dport: 9000, flags: TCP_ACK })
      .payload(64)
      .build();
    const syn = Buffer.from(out);
    syn[L3 + 33] = TCP_SYN;
    e.out4(syn, L3, syn.length, 0, 100);
    const fport = (syn[L3 + 20]! << 8) | syn[L3 + 21]!;
    const back = pkt()
      .eth()
      .ipv4({ src: '198.51.100.5', dst: '203.0.113.100' })
      .tcp({ sport: 9000, dport: fport, flags: TCP_ACK })
      .payload(64)
      .build();
    const n = 2_000_000;
    const fo = Buffer.from(out);
    const fb = Buffer.from(back);
    for (let i = 0; i < 100_000; i++) {
      out.copy(fo);
      e.out4(fo, L3, fo.length, 0, 100);
    }
    let t0 = performance.now();
    for (let i = 0; i < n; i++) {
      out.copy(fo);
      e.out4(fo, L3, fo.length, 0, 100);
    }
    results['outNsPerPacket'] = Math.round(((performance.now() - t0) * 1e6) / n);
    t0 = performance.now();
    for (let i = 0; i < n; i++) {
      back.copy(fb);
      if (e.in4(fb, L3, fb.length, 100) < 0) throw new Error('reply not found');
    }
    results['inNsPerPacket'] = Math.round(((performance.now() - t0) * 1e6) / n);
    // the copy alone, to subtract
    t0 = performance.now();
    for (let i = 0; i < n; i++) out.copy(fo);
    results['copyNsPerPacket'] = Math.round(((performance.now() - t0) * 1e6) / n);
  }

  // memory per flow at o.flows live flows
  {
    gc?.();
    const m0 = process.memoryUsage();
    const table = new HostFlowTable(o.flows * 2 + 16);
    const e = new SnatEngine(table, o.flows + 16);
    e.setNic(0, { vni: 5001, idleS: 240, tcpResetOnIdle: false, tcp: true, udp: true, ranges4: ranges(o.flows), ranges6: [] });
    const f = pkt().eth().ipv4({ src: '192.0.2.11', dst: '198.51.100.5' }).tcp({ sport: 1, dport: 9000, flags: TCP_SYN }).build();
    for (let i = 0; i < o.flows; i++) {
      f[L3 + 20] = (i >>> 8) & 0xff; // DIP port: the low 16 bits
      f[L3 + 21] = i & 0xff;
      f[L3 + 19] = (i >>> 16) & 0xff; // remote 198.51.100.x: the rest
      if (e.out4(f, L3, f.length, 0, 100) < 0) throw new Error(`flow ${i} refused`);
    }
    gc?.();
    const m1 = process.memoryUsage();
    results['flows'] = e.live;
    results['tableEntries'] = table.size;
    results['slotBytesPerFlow'] = Math.round(e.bytes / o.flows);
    results['tableBytesPerFlow'] = Math.round(table.table.bytes / o.flows);
    results['measuredBytesPerFlow'] = Math.round((m1.arrayBuffers + m1.heapUsed - m0.arrayBuffers - m0.heapUsed) / o.flows);
    results['gcExposed'] = gc !== undefined ? 1 : 0;
  }

  for (const [k, v] of Object.entries(results)) process.stdout.write(`${k.padEnd(22)} ${v}\n`);
  if (o.json !== null) writeFileSync(o.json, `${JSON.stringify(results, null, 1)}\n`);
}

main();
