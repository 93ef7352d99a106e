// Scenario 41 (workers): what --workers 2 on every MUX must not change, read from the captures at the
// backends' ports and the MUXes' /status:
//   - each MUX's two workers both carried traffic (else the order check below proves nothing);
//   - no reordering within a flow: at each backend's port, every client TCP flow's segments arrive in
//     sequence order (a segment below the highest sequence seen is a reorder unless the flow carried that
//     same segment before: a retransmission);
//   - a table change under traffic (a drain): every worker of every MUX acknowledged the MUX's generation,
//     and no new connection made after that reached the drained backend (its SYNs from the client, of
//     4-tuples the lab had not used before: a reused tuple may still be in a flow table, which keeps it);
//     the new connections reached the other backends.
//
//   verify.js workers --run DIR --drained NIC --port 80 --before a,b --after c,d --status s1,s2
// --before: capture names (DIR/pcaps/NAME.pcap) at the backends before and during the change; --after:
// those started once every worker acknowledged it; --status: the MUXes' /status JSON files after the run.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Checks, flagsOf, loadCapture, need, type CapturedPacket } from './check.js';
import { TCP_SYN, TCP_ACK } from '../../../shared/tcp.js';

interface Seg {
  flow: string;
  seq: number;
  len: number;
  syn: boolean;
}

function clientSegments(pkts: CapturedPacket[], port: number, clientPrefix: string): Seg[] {
  const out: Seg[] = [];
  for (const p of pkts) {
    const ip = p.d.first('ipv4') ?? p.d.first('ipv6');
    const tcp = p.d.first('tcp');
    if (ip === undefined || tcp === undefined || tcp.dstPort !== port || !ip.src.startsWith(clientPrefix)) continue;
    out.push({
      flow: `${ip.src}:${tcp.srcPort}>${ip.dst}`,
      seq: tcp.seq >>> 0,
      len: tcp.payloadLen,
      syn: (tcp.flags & TCP_SYN) !== 0 && (tcp.flags & TCP_ACK) === 0,
    });
  }
  return out;
}

/** Segments below the highest sequence number seen in their flow that the flow had not carried before. */
function reorders(segs: Seg[]): { flows: number; segments: number; reordered: string[] } {
  const state = new Map<string, { top: number; seen: Set<string> }>();
  const reordered: string[] = [];
  for (const s of segs) {
    let f = state.get(s.flow);
    // a SYN starts a connection's sequence space: a 4-tuple the client reused starts over
    if (f === undefined || s.syn) state.set(s.flow, (f = { top: s.seq, seen: new Set() }));
    const key = `${s.seq}/${s.len}`;
    // 32-bit sequence arithmetic: below the top when the difference, as a signed number, is negative
    const below = ((s.seq - f.top) | 0) < 0;
    if (below && !f.seen.has(key)) reordered.push(`${s.flow} seq ${s.seq} after ${f.top}`);
    f.seen.add(key);
    if (!below) f.top = s.seq;
  }
  return { flows: state.size, segments: segs.length, reordered };
}

export function verifyWorkers(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const port = Number(need(f, 'port'));
  const drained = need(f, 'drained');
  const clientPrefix = f.get('client-prefix') ?? '198.51.100.';
  const before = need(f, 'before').split(',');
  const after = need(f, 'after').split(',');
  const statuses = need(f, 'status').split(',');
  const c = new Checks();

  for (const file of statuses) {
    const s = JSON.parse(readFileSync(file, 'utf8')) as {
      name: string;
      generation: number;
      workers?: {
        worker: number;
        alive: boolean;
        generation: number;
        txPackets: number;
        restarts: number;
        flows?: { ipv4: number; ipv6: number } | null;
      }[];
    };
    const ws = s.workers ?? [];
    c.check(
      ws.length === 2 && ws.every((w) => w.alive && w.generation === s.generation),
      `${s.name}: 2 workers, alive, each at the MUX's generation ${s.generation}`,
      ws
        .map((w) => `worker ${w.worker}: generation ${w.generation}, ${w.alive ? 'alive' : 'not alive'}, ${w.restarts} restarts`)
        .join('; ') || 'no workers in /status',
    );
    c.check(
      ws.length === 2 && ws.every((w) => w.txPackets > 0),
      `${s.name}: both workers forwarded frames (the kernel spread the flows)`,
      ws.map((w) => `worker ${w.worker}: ${w.txPackets} sent`).join(', '),
    );
    // GET /metrics, scraped right after /status: the flows gauge counts the workers' tables (the main
    // thread's own are empty with workers); the reports behind both are at most 250 ms apart, and no
    // flow starts or expires meanwhile (the traffic is over, the idle timeout far), so they agree
    const metrics = join(dirname(file), `metrics-${s.name}.txt`);
    const gauge = existsSync(metrics)
      ? readFileSync(metrics, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('slbx_mux_flows{') && l.includes('kind="trusted"'))
          .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
      : -1;
    const inWorkers = ws.reduce((n, w) => n + (w.flows?.ipv4 ?? 0) + (w.flows?.ipv6 ?? 0), 0);
    c.check(
      gauge > 0 && gauge === inWorkers,
      `${s.name}: GET /metrics slbx_mux_flows (trusted) counts the flows the workers hold`,
      `gauge ${gauge < 0 ? 'not scraped' : gauge}, workers' tables (/status workers[].flows) ${inWorkers}`,
    );
  }

  const load = (name: string) => loadCapture(`${run}/pcaps/${name}.pcap`);
  const beforeSegs = before.map((n) => ({ n, segs: clientSegments(load(n), port, clientPrefix) }));
  const afterSegs = after.map((n) => ({ n, segs: clientSegments(load(n), port, clientPrefix) }));
  let flows = 0;
  let segments = 0;
  const reordered: string[] = [];
  for (const { n, segs } of [...beforeSegs, ...afterSegs]) {
    const r = reorders(segs);
    flows += r.flows;
    segments += r.segments;
    reordered.push(...r.reordered.map((x) => `${n}: ${x}`));
  }
  c.check(
    reordered.length === 0 && segments > 0,
    'no reordering within a flow at the backends: every client TCP flow in sequence order (retransmissions aside)',
    `${flows} flows, ${segments} client segments in ${before.length + after.length} captures; ${reordered.length} out of order${reordered.length > 0 ? `: ${reordered.slice(0, 3).join('; ')}` : ''}`,
  );

  const used = new Set<string>();
  for (const { segs } of beforeSegs) for (const s of segs) used.add(s.flow.split('>')[0]!);
  let newSyns = 0;
  let newSynsDrained = 0;
  let reusedDrained = 0;
  for (const { n, segs } of afterSegs) {
    for (const s of segs) {
      if (!s.syn) continue;
      const fresh = !used.has(s.flow.split('>')[0]!);
      if (fresh) newSyns++;
      if (n.startsWith(`${drained}-`)) {
        if (fresh) newSynsDrained++;
        else reusedDrained++;
      }
    }
  }
  c.check(
    newSyns > 0 && newSynsDrained === 0,
    `after every worker acknowledged the drain, no new connection reached the drained ${drained}`,
    `${newSyns} new connections' SYNs at the backends, ${newSynsDrained} of them at ${drained}` +
      (reusedDrained > 0 ? `; ${reusedDrained} SYNs of reused 4-tuples at ${drained} (a flow entry kept)` : ''),
  );
  return c;
}
