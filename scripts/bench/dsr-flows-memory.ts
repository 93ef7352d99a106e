#!/usr/bin/env node
// Bytes per return-path flow in the host agent (issue 16, point 4): fills the host flow table with N
// load-balanced flows through the data plane (processInbound of one client packet per flow, as a MUX
// delivers it) and reads the process's memory before and after (process.memoryUsage: the table lives in
// typed arrays, counted in arrayBuffers; rss for the whole process), and the table's own array bytes.
//
//   node --expose-gc dist/scripts/bench/dsr-flows-memory.js [--flows 1000000] [--json]
import { mac } from '../../shared/addr.js';
import { pkt } from '../../shared/packet-builder.js';
import { TCP_ACK } from '../../shared/tcp.js';
import { compileHostTables } from '../../host-agent/tables.js';
import { newHostContext, processInbound, VERDICT_FORWARD } from '../../host-agent/data-plane.js';
import { newEwState } from '../../host-agent/east-west.js';
import { parseConfig, formatConfigErrors } from '../../shared/config.js';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write('usage: node --expose-gc dist/scripts/bench/dsr-flows-memory.js [--flows N] [--json]\n');
  process.exit(0);
}
const fi = args.indexOf('--flows');
const N = fi >= 0 ? Number(args[fi + 1]) : 1_000_000;
if (!Number.isInteger(N) || N < 1 || N > 16_000_000) {
  process.stderr.write('dsr-flows-memory: --flows must be an integer 1..16000000\n');
  process.exit(2);
}
const text = readFileSync(fileURLToPath(new URL('../../../examples/lab.yaml', import.meta.url)), 'utf8');
const parsed = parseConfig(text, 'lab.yaml');
if (!parsed.ok) throw new Error(formatConfigErrors(parsed.errors, 'lab.yaml'));
const config = parsed.config;
const ctx = newHostContext(compileHostTables(config, 'host1', 1), config.fabric.vxlanPort, [
  mac('02:00:00:01:00:01'),
  mac('02:00:00:01:00:02'),
]);
const gc = (globalThis as { gc?: () => void }).gc;
const mem = () => {
  gc?.();
  gc?.();
  return process.memoryUsage();
};
const m0 = mem();
ctx.ew = newEwState(N);
// one frame, its client address and port rewritten per flow (N distinct 5-tuples: 2^16 ports x addresses)
const frame = pkt()
  .eth({ src: '02:00:00:00:00:11', dst: '02:00:00:00:00:21' })
  .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
  .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
  .vxlan({ vni: 5001 })
  .eth({ src: '02:00:00:00:00:11', dst: '02:00:c0:00:02:0a' })
  .ipv4({ src: '10.0.0.0', dst: '203.0.113.10' })
  .tcp({ sport: 1, dport: 80, flags: TCP_ACK })
  .build();
const inner = 14 + 20 + 8 + 8 + 14;
const work = Buffer.from(frame);
const t0 = performance.now();
for (let i = 0; i < N; i++) {
  work.set(frame);
  const a = 0x0a000000 + Math.floor(i / 60000);
  work.writeUInt32BE(a >>> 0, inner + 12);
  work.writeUInt16BE(1024 + (i % 60000), inner + 20);
  // the inner IPv4 header checksum over the new source (the data plane checks it)
  work.writeUInt16BE(0, inner + 10);
  let s = 0;
  for (let k = 0; k < 20; k += 2) s += work.readUInt16BE(inner + k);
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  work.writeUInt16BE(~s & 0xffff, inner + 10);
  if (processInbound(work, work.length, ctx) !== VERDICT_FORWARD)
    throw new Error(`flow ${i} not delivered: ${ctx.counters.names[ctx.lastDrop]}`);
}
const seconds = (performance.now() - t0) / 1000;
const m1 = mem();
const flows = ctx.ew.flows.size;
const r = {
  flows,
  learned: ctx.counters.get('dsr_flows_learned'),
  full: ctx.counters.get('dsr_flows_full'),
  tableCapacity: ctx.ew.flows.table.capacity,
  tableBytes: ctx.ew.flows.table.bytes,
  tableBytesPerFlow: ctx.ew.flows.table.bytes / flows,
  arrayBuffersPerFlow: (m1.arrayBuffers - m0.arrayBuffers) / flows,
  rssPerFlow: (m1.rss - m0.rss) / flows,
  rssMB: m1.rss / 1e6,
  fillSeconds: seconds,
};
if (args.includes('--json')) process.stdout.write(`${JSON.stringify(r)}\n`);
else
  process.stdout.write(
    `${flows} flows (learned ${r.learned}, full ${r.full}): table ${r.tableCapacity} slots, ${(r.tableBytes / 1e6).toFixed(1)} MB = ` +
      `${r.tableBytesPerFlow.toFixed(1)} B/flow; arrayBuffers +${r.arrayBuffersPerFlow.toFixed(1)} B/flow, rss +${r.rssPerFlow.toFixed(1)} B/flow ` +
      `(rss ${r.rssMB.toFixed(0)} MB); filled in ${seconds.toFixed(1)} s\n`,
  );
