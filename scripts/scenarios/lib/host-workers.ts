// Scenario 42 (host-workers): what --workers 2 on every host agent (and MUX) must not change, read from
// the host agents' /status and /counters and from the client's captures:
//   - each host agent has 2 workers, alive, each at the agent's generation, each with the fabric's and
//     every port's socket in its group, none restarted, and both received frames (the kernel spread them);
//   - over the traffic between two counter reads, no reply of a load-balanced flow was dropped as
//     unsolicited and nothing was dropped as an internal error: the backend's reply reached the worker
//     that learned the flow from its request (both directions of every flow on one worker), and every
//     delivered frame had its port's socket;
//   - no reordering within a flow in the reply direction: at the client, every server TCP flow's segments
//     arrive in sequence order (retransmissions aside). The request direction is checked at the backends
//     by scenario 41's verifier (workers).
//
//   verify.js host-workers --run DIR --status s1,s2 --before c1,c2 --after c1,c2 --client-captures a,b [--port 80]
// --status: the host agents' /status JSON files; --before/--after: their /counters before and after the
// traffic, in the same order; --client-captures: capture names (DIR/pcaps/NAME.pcap) at the client.
import { readFileSync } from 'node:fs';
import { Checks, flagsOf, loadCapture, need } from './check.js';
import { TCP_SYN } from '../../../shared/tcp.js';

interface HostStatus {
  name: string;
  ready: boolean;
  generation: number;
  ports: unknown[];
  workers?: {
    worker: number;
    alive: boolean;
    generation: number;
    restarts: number;
    fabricOpen: boolean;
    portsOpen: string[];
    rxPackets: number;
    flows: number | null;
  }[];
  eastWest?: { flows: Record<string, number> };
}

/**
 * Server segments (source port `port`; side 'request': the client's, destination port `port`) per flow, in
 * capture order: those below the flow's highest sequence it had not carried before.
 */
export function replyReorders(
  pkts: ReturnType<typeof loadCapture>,
  port: number,
  side: 'reply' | 'request' = 'reply',
): { flows: number; segments: number; reordered: string[] } {
  const state = new Map<string, { top: number; seen: Set<string> }>();
  const reordered: string[] = [];
  let segments = 0;
  for (const p of pkts) {
    const ip = p.d.first('ipv4') ?? p.d.first('ipv6');
    const tcp = p.d.first('tcp');
    if (ip === undefined || tcp === undefined || (side === 'reply' ? tcp.srcPort : tcp.dstPort) !== port) continue;
    segments++;
    const flow = `${ip.src}:${tcp.srcPort}>${ip.dst}:${tcp.dstPort}`;
    const seq = tcp.seq >>> 0;
    let f = state.get(flow);
    // a SYN (the server's SYN-ACK) starts a connection's sequence space: a 4-tuple the client reused starts over
    if (f === undefined || (tcp.flags & TCP_SYN) !== 0) state.set(flow, (f = { top: seq, seen: new Set() }));
    const key = `${seq}/${tcp.payloadLen}`;
    const below = ((seq - f.top) | 0) < 0;
    if (below && !f.seen.has(key)) reordered.push(`${flow} seq ${seq} after ${f.top}`);
    f.seen.add(key);
    if (!below) f.top = seq;
  }
  return { flows: state.size, segments, reordered };
}

export function verifyHostWorkers(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const port = Number(f.get('port') ?? '80');
  const statuses = need(f, 'status').split(',');
  const before = need(f, 'before').split(',');
  const after = need(f, 'after').split(',');
  const captures = need(f, 'client-captures').split(',');
  const c = new Checks();
  const json = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>;

  statuses.forEach((file, i) => {
    const s = JSON.parse(readFileSync(file, 'utf8')) as HostStatus;
    const ws = s.workers ?? [];
    c.check(
      s.ready &&
        ws.length === 2 &&
        ws.every(
          (w) => w.alive && w.generation === s.generation && w.restarts === 0 && w.fabricOpen && w.portsOpen.length === s.ports.length,
        ),
      `${s.name}: ready, 2 workers, alive, each at the agent's generation ${s.generation}, in the fabric's and all ${s.ports.length} ports' groups`,
      ws
        .map(
          (w) =>
            `worker ${w.worker}: generation ${w.generation}, ${w.alive ? 'alive' : 'not alive'}, ${w.restarts} restarts, ` +
            `fabric ${w.fabricOpen ? 'open' : 'closed'}, ports ${w.portsOpen.join('+') || 'none'}`,
        )
        .join('; ') || 'no workers in /status',
    );
    c.check(
      ws.length === 2 && ws.every((w) => w.rxPackets > 0),
      `${s.name}: both workers received frames (the kernel spread the flows)`,
      ws.map((w) => `worker ${w.worker}: ${w.rxPackets} received`).join(', '),
    );
    // the flow tables are the workers': /status's eastWest sums their reports (the main thread's table is empty)
    const ew = s.eastWest?.flows ?? {};
    const dsr = (ew['dsr'] ?? 0) + (ew['dsr_closing'] ?? 0);
    c.check(
      dsr > 0 && ws.every((w) => (w.flows ?? 0) > 0),
      `${s.name}: /status eastWest counts the workers' return-path entries, and each worker holds some`,
      `eastWest.flows dsr ${ew['dsr'] ?? 'absent'}, dsr_closing ${ew['dsr_closing'] ?? 'absent'}; ` +
        ws.map((w) => `worker ${w.worker}: ${w.flows ?? 'no report'} entries`).join(', '),
    );
    const a = json(before[i]!);
    const b = json(after[i]!);
    const d = (k: string) => (b[k] ?? 0) - (a[k] ?? 0);
    c.check(
      d('in_delivered') > 0 && d('out_dsr') > 0 && d('drop_out_dsr_unsolicited') === 0 && d('drop_internal_error') === 0,
      `${s.name}: every backend reply found its flow on its worker (no drop_out_dsr_unsolicited), no internal error`,
      `over the traffic: in_delivered +${d('in_delivered')}, out_dsr +${d('out_dsr')}, drop_out_dsr_unsolicited +${d('drop_out_dsr_unsolicited')}, drop_internal_error +${d('drop_internal_error')}`,
    );
  });

  let flows = 0;
  let segments = 0;
  const reordered: string[] = [];
  for (const n of captures) {
    const r = replyReorders(loadCapture(`${run}/pcaps/${n}.pcap`), port);
    flows += r.flows;
    segments += r.segments;
    reordered.push(...r.reordered.map((x) => `${n}: ${x}`));
  }
  c.check(
    reordered.length === 0 && segments > 0,
    'no reordering within a flow in the reply direction (direct server return from the host workers): every server TCP flow in sequence order at the client',
    `${flows} flows, ${segments} server segments in ${captures.length} captures; ${reordered.length} out of order${reordered.length > 0 ? `: ${reordered.slice(0, 3).join('; ')}` : ''}`,
  );
  return c;
}
