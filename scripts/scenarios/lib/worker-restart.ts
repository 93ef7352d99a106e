// Scenario 44 (worker-restart, issue 19): a MUX worker and a host agent worker killed under traffic through
// the daemons' test hook (--test-hooks: POST /test/workers/<i>/exit). Read from the files the scenario saved
// in RUN/wr/ (each daemon's /status and GET /test/workers before the kill and after the restart, its
// /counters at the kill and the restart, the host's before and after the traffic, the router's route polls
// and BIRD's protocols), the clients' records and the captures:
//   - each killed worker was restarted: its restart count is 1, it is alive on a new thread at its daemon's
//     generation; the other worker kept its thread and had no restart, and the daemon kept forwarding while
//     the killed one was down (its counters grew between the kill and the restart); the daemon kept its PID; the router routed the VIP over every MUX in every poll (no withdrawal) and each
//     BGP session kept its start time (never re-established);
//   - MUX: every connection answered by the backend the Maglev table names (computed from the config; the
//     dead worker's flows fell back to the stateless Maglev choice), no request failed for it; no RST from
//     the server side at the client (tshark);
//   - host agent (--state-dir): the restarted worker carried its flows: its /status row says what it
//     restored (dsr_flows_restored + dsr_flows_replayed, the catch-up of its regroup included) and that is
//     more than 0. The backend segments (data, SYN, FIN) that reached the backends' links but not the
//     client are counted, with how long each waited for its retransmission to get through; at the killed
//     worker's host they are allowed only from the kill to the end of the regroup (BACK_US): the other
//     worker had every frame then and dropped the replies of flows whose client had sent nothing since the
//     kill (drop_out_dsr_unsolicited), and the kernel dropped those of the regroup's instant with no member;
//     none at the other host; the agent's drop_out_dsr_unsolicited grew by no more than the lost copies its
//     links show, and not at all after the regroup. No connection stalls (a stall, a connection whose
//     answer is dropped every time, is what a worker restarted without its flows does): nothing fails;
//   - no reordering within a flow: replies at the client, requests at the backends' links (a lost segment's
//     retransmission aside: judged as a loss above).
//
//   - the server-first requests (RUN/wr/slow.json, --slow-ms: opened just before the host worker kill, the
//     server answering after the restart) are all answered, some of them by the killed worker's flows
//     (host1's backends, the client's end steering to that worker among the 2);
//
//   verify.js worker-restart --run DIR --vip A --port N [--slow-ms MS]
// RUN/wr/events.txt: "KIND NODE WORKER KILL_US BACK_US PID_BEFORE PID_AFTER" per kill (BACK_US: the
// restarted worker seen alive at the daemon's generation). Captures: RUN/pcaps/client1.pcap and NIC.pcap.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields, type CapturedPacket } from './check.js';
import { expectedBackend, ipOf, readJson, readPolls } from './bgp.js';
import { replyReorders } from './host-workers.js';
import { readClientJson } from '../../lab/client.js';
import { TCP_FIN, TCP_SYN } from '../../../shared/tcp.js';
import { ip } from '../../../shared/addr.js';
import { steeringKeyOfEnd, steerWorker } from '../../../host-agent/worker-steering.js';

interface Kill {
  kind: 'mux' | 'host';
  node: string;
  worker: number;
  killUs: number;
  backUs: number;
  pidBefore: string;
  pidAfter: string;
}

/** A host agent worker's flow snapshot in its /status row (host-agent/worker-protocol.ts HostWorkerFlowSnapshot). */
interface HostFlowSnapshotRow {
  dsrRestored: number;
  dsrReplayed: number;
  dsrCaughtUp: number;
  snatRestored: number;
  setsRead: string[];
}

interface WorkerStatus {
  worker: number;
  alive: boolean;
  generation: number;
  restarts: number;
  rxPackets: number;
}

/** Segment copies per key in a capture, with their times. */
function copies(pkts: CapturedPacket[], keyOf: (p: CapturedPacket) => string | null): Map<string, number[]> {
  const m = new Map<string, number[]>();
  for (const p of pkts) {
    const k = keyOf(p);
    if (k === null) continue;
    const l = m.get(k);
    if (l === undefined) m.set(k, [p.tsUs]);
    else l.push(p.tsUs);
  }
  return m;
}

/** A segment key's flow and its range in sequence space (SYN and FIN take one each), or null. */
function seqRange(k: string): { flow: string; seq: number; size: number } | null {
  const m = /^(\S+) seq (\d+) len (\d+) flags (\d+)$/.exec(k);
  if (m === null) return null;
  const f = Number(m[4]);
  return { flow: m[1]!, seq: Number(m[2]), size: Number(m[3]) + ((f & TCP_SYN) !== 0 ? 1 : 0) + ((f & TCP_FIN) !== 0 ? 1 : 0) };
}

/**
 * The segment copies seen at `from` but not at `to` (the earliest ones taken as lost), each with when it
 * first got through: the same segment, or a later one at `to` that covers its sequence range (`via`):
 * Linux may retransmit lost segments collapsed into one (data and the FIN that followed it, scenario 44).
 */
function lostCopies(
  from: Map<string, number[]>,
  to: Map<string, number[]>,
): { key: string; us: number; throughUs: number | null; via?: string }[] {
  const out: { key: string; us: number; throughUs: number | null; via?: string }[] = [];
  const byFlow = new Map<string, { key: string; seq: number; size: number; ts: number[] }[]>();
  for (const [k, ts] of to) {
    const r = seqRange(k);
    if (r === null) continue;
    const l = byFlow.get(r.flow) ?? [];
    l.push({ key: k, seq: r.seq, size: r.size, ts });
    byFlow.set(r.flow, l);
  }
  for (const [k, ts] of from) {
    const got = to.get(k) ?? [];
    for (let i = 0; i < ts.length - got.length; i++) {
      if (got.length > 0) {
        out.push({ key: k, us: ts[i]!, throughUs: got[0]! });
        continue;
      }
      const r = seqRange(k);
      let best: { key: string; us: number } | null = null;
      for (const c of r === null ? [] : (byFlow.get(r.flow) ?? [])) {
        // wrap-safe: r's range lies inside c's
        const off = (r!.seq - c.seq) >>> 0;
        if (c.key === k || off + r!.size > c.size) continue;
        const t = c.ts.find((x) => x > ts[i]!);
        if (t !== undefined && (best === null || t < best.us)) best = { key: c.key, us: t };
      }
      out.push(best === null ? { key: k, us: ts[i]!, throughUs: null } : { key: k, us: ts[i]!, throughUs: best.us, via: best.key });
    }
  }
  return out.sort((a, b) => a.us - b.us);
}

export function verifyWorkerRestart(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const port = Number(need(f, 'port'));
  const wr = join(run, 'wr');
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const kills: Kill[] = readFileSync(join(wr, 'events.txt'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [kind, node, worker, killUs, backUs, pidBefore, pidAfter] = l.split(' ');
      return {
        kind: kind as Kill['kind'],
        node: node!,
        worker: Number(worker),
        killUs: Number(killUs),
        backUs: Number(backUs),
        pidBefore: pidBefore!,
        pidAfter: pidAfter!,
      };
    });
  c.check(
    kills.length === 2,
    'a MUX worker and a host agent worker were killed',
    kills.map((k) => `${k.node} worker ${k.worker}`).join(', '),
  );

  // 1. each killed worker restarted on a new thread at its daemon's generation; the other went on
  for (const k of kills) {
    const s1 = readJson(join(wr, `${k.node}-status-after.json`)) as { generation: number; workers?: WorkerStatus[] };
    const t0 = (readJson(join(wr, `${k.node}-threads-before.json`)) as { workers: { threadId: number | null }[] }).workers;
    const t1 = (readJson(join(wr, `${k.node}-threads-after.json`)) as { workers: { threadId: number | null }[] }).workers;
    const w1 = s1.workers?.[k.worker];
    const other = 1 - k.worker;
    c.check(
      w1 !== undefined &&
        w1.restarts === 1 &&
        w1.alive &&
        w1.generation === s1.generation &&
        t1[k.worker]?.threadId != null &&
        t1[k.worker]!.threadId !== t0[k.worker]?.threadId,
      `${k.node}: worker ${k.worker} was restarted: 1 restart, alive on a new thread, at the daemon's generation`,
      w1 === undefined
        ? 'not in /status'
        : `${w1.restarts} restarts, ${w1.alive ? 'alive' : 'not alive'}, generation ${w1.generation} of ${s1.generation}, thread ${t0[k.worker]?.threadId} -> ${t1[k.worker]?.threadId}, back ${((k.backUs - k.killUs) / 1000).toFixed(0)} ms after the kill`,
    );
    const o1 = s1.workers?.[other];
    // the daemon's traffic between the kill and the restart (the killed worker's shared counters stand still
    // while it is dead): the MUX's frames received, the host agent's frames delivered to the backends
    const counter = k.kind === 'mux' ? 'rx_packets' : 'in_delivered';
    const ca = (readJson(join(wr, `${k.node}-counters-kill.json`)) as Record<string, number>)[counter] ?? 0;
    const cb = (readJson(join(wr, `${k.node}-counters-back.json`)) as Record<string, number>)[counter] ?? 0;
    c.check(
      o1 !== undefined && o1.restarts === 0 && o1.alive && t1[other]?.threadId === t0[other]?.threadId && cb > ca,
      `${k.node}: worker ${other} never stopped: the same thread, no restart, and the daemon kept forwarding while worker ${k.worker} was down`,
      o1 === undefined
        ? 'not in /status'
        : `thread ${t0[other]?.threadId} -> ${t1[other]?.threadId}, ${o1.restarts} restarts; ${counter} ${ca} at the kill -> ${cb} at the restart`,
    );
    c.check(
      k.pidBefore === k.pidAfter && k.pidBefore !== '',
      `${k.node}: the daemon kept running (the same PID)`,
      `${k.pidBefore} -> ${k.pidAfter}`,
    );
  }

  // 2. the router: every MUX in every route poll (no withdrawal); no BGP session re-established
  const pas = config.muxes.map((m) => m.address.text).sort();
  const polls = readPolls(join(wr, 'polls.txt'));
  const short = polls.filter((p) => pas.some((a) => !p.hops.includes(a)));
  c.check(
    polls.length > 0 && short.length === 0,
    `the router routed ${vip} over every MUX in every poll (no route withdrawn)`,
    `${polls.length} polls over ${polls.length > 0 ? ((polls.at(-1)!.us - polls[0]!.us) / 1e6).toFixed(1) : 0} s; ${short.length} without ${pas.join(' or ')}`,
  );
  const since = (file: string) =>
    new Map(
      [...readFileSync(join(wr, file), 'utf8').matchAll(/^(\S+)\s+BGP\s+\S+\s+up\s+(\S+(?: \S+)?)\s+Established/gm)].map((m) => [
        m[1]!,
        m[2]!,
      ]),
    );
  const b0 = since('bird-before.txt');
  const b1 = since('bird-after.txt');
  const muxNames = config.muxes.map((m) => m.name);
  c.check(
    muxNames.every((m) => b0.has(m) && b0.get(m) === b1.get(m)),
    'every BGP session stayed Established, never re-established (BIRD: the same start time before and after)',
    muxNames.map((m) => `${m} ${b0.get(m) ?? '?'} -> ${b1.get(m) ?? 'not established'}`).join(', '),
  );

  // 3. what was lost and retransmitted: replies (backend links -> client), requests (client -> backend links)
  const clientPcap = join(run, 'pcaps', 'client1.pcap');
  const client = loadCapture(clientPcap);
  const nics = config.nics.map((n) => ({ name: n.name, host: n.host, pkts: loadCapture(join(run, 'pcaps', `${n.name}.pcap`)) }));
  const tcpKey = (p: CapturedPacket, reply: boolean): string | null => {
    const ip = ipOf(p);
    const t = p.d.first('tcp');
    if (ip === undefined || t === undefined || (reply ? t.srcPort : t.dstPort) !== port) return null;
    // segments that take sequence space (data, SYN, FIN): what TCP retransmits, with the same sequence
    // number and length (a later ack number); pure ACKs are cumulative, never retransmitted: not counted
    const span = t.flags & (TCP_SYN | TCP_FIN);
    if (t.payloadLen === 0 && span === 0) return null;
    const peer = reply ? `${ip.dst}:${t.dstPort}` : `${ip.src}:${t.srcPort}`;
    return `${peer} seq ${t.seq >>> 0} len ${t.payloadLen} flags ${span}`;
  };
  const host = kills.find((k) => k.kind === 'host');
  const mux = kills.find((k) => k.kind === 'mux');
  // the client's connections (its address and port): a backend also answers the host agent's probes (from
  // the gateway address), which never go to the client
  const clientFlows = new Set(
    client.map((p) => (p.d.first('tcp')?.dstPort === port ? `${ipOf(p)?.src}:${p.d.first('tcp')!.srcPort}` : '')).filter((x) => x !== ''),
  );
  const clientReplies = copies(client, (p) => tcpKey(p, true));
  const clientRequests = copies(client, (p) => tcpKey(p, false));
  const inWindow = (k: Kill | undefined, us: number) => k !== undefined && us >= k.killUs - 100_000 && us <= k.backUs + 10_000_000;
  // a backend segment lost at the killed worker's host: only while that worker was down, up to the end of its regroup
  const inDownWindow = (k: Kill | undefined, us: number) => k !== undefined && us >= k.killUs - 100_000 && us <= k.backUs;
  // stalled (named in the details; no longer allowed): a connection that failed after a reply of it left its
  // backend while the host worker was down and was dropped. Without the flows carried over this happened:
  // its request was recorded by the worker that died, the other worker (and a restarted one that starts
  // empty) has no entry for it, and the client, waiting for the answer, sends nothing that would record it
  // again: every retransmission is dropped too, until the client gives up
  const flowOf = (x: { sourceAddress: string | null; sourcePort: number | null }) => `${x.sourceAddress}:${x.sourcePort}`;
  const hold = readClientJson(join(wr, 'hold.json'), 'hold');
  const http = readClientJson(join(wr, 'http.json'), 'http');
  const failedFlows = new Set([...hold.records, ...http.records].filter((x) => !x.ok).map(flowOf));
  const stalled = new Set<string>();
  // segments with a lost copy, per side: their later copy is a retransmission, not a reordering
  const lostKeys = { reply: new Set<string>(), request: new Set<string>() };
  for (const side of ['reply', 'request'] as const) {
    const lost: { key: string; us: number; throughUs: number | null; via?: string; host: string }[] = [];
    for (const n of nics) {
      const atNic = copies(n.pkts, (p) => {
        const k = tcpKey(p, side === 'reply');
        return k !== null && clientFlows.has(k.split(' ')[0]!) ? k : null;
      });
      const l = side === 'reply' ? lostCopies(atNic, clientReplies) : lostCopies(clientRequests, atNic);
      // a request copy lost on the way shows at every backend link as missing: only this nic's flows count
      // (its own copy of the segment, or the collapsed retransmission that covered it: `via` is one of its)
      lost.push(...l.filter((x) => side === 'reply' || atNic.has(x.key) || x.via !== undefined).map((x) => ({ ...x, host: n.host })));
    }
    for (const x of lost) {
      lostKeys[side].add(x.key);
      if (x.via !== undefined) lostKeys[side].add(x.via); // the collapsed retransmission: not a reordering
    }
    const flowKey = (x: { key: string }) => x.key.split(' ')[0]!;
    if (side === 'reply' && host !== undefined) {
      const firstLoss = new Map<string, number>();
      for (const x of lost) if (x.host === host.node) firstLoss.set(flowKey(x), Math.min(firstLoss.get(flowKey(x)) ?? Infinity, x.us));
      for (const [flow, us] of firstLoss) if (us >= host.killUs - 100_000 && us <= host.backUs && failedFlows.has(flow)) stalled.add(flow);
    }
    const ofStalled = lost.filter((x) => stalled.has(flowKey(x)));
    const judged = lost; // a stalled connection's copies too: they never get through
    const never = judged.filter((x) => x.throughUs === null);
    const window = side === 'reply' ? [host] : [mux, host];
    const outside = judged.filter((x) =>
      side === 'reply' ? x.host !== host?.node || !inDownWindow(host, x.us) : !window.some((k) => inWindow(k, x.us)),
    );
    const gaps = judged.filter((x) => x.throughUs !== null).map((x) => (x.throughUs! - x.us) / 1000);
    const flows = new Set(judged.map(flowKey));
    const what = side === 'reply' ? 'backend segments that did not reach the client' : 'client segments that did not reach a backend';
    c.check(
      never.length === 0 && outside.length === 0,
      `${what}: all within the ${side === 'reply' ? `host worker's down time at ${host?.node} (kill to the end of its regroup)` : "kills' windows"}, each got through on a retransmission`,
      `${judged.length} copies in ${flows.size} flows; ${never.length} never got through; ${outside.length} outside; ` +
        `time until the retransmission got through: max ${gaps.length > 0 ? Math.max(...gaps).toFixed(0) : 0} ms, median ${gaps.length > 0 ? gaps.sort((x, y) => x - y)[Math.floor(gaps.length / 2)]!.toFixed(0) : 0} ms` +
        (judged.length > 0 && (side === 'reply' ? host : mux) !== undefined
          ? `; first at +${((judged[0]!.us - (side === 'reply' ? host! : mux!).killUs) / 1000).toFixed(0)} ms after the ${side === 'reply' ? 'host' : 'MUX'} worker kill`
          : '') +
        (side === 'reply'
          ? `; stalled connections: ${stalled.size}, ${ofStalled.length} copies, ${ofStalled.filter((x) => x.throughUs === null).length} never through`
          : ''),
    );
    if (side === 'reply' && host !== undefined) {
      const a = readJson(join(wr, `${host.node}-counters-before.json`)) as Record<string, number>;
      const k0 = readJson(join(wr, `${host.node}-counters-kill.json`)) as Record<string, number>;
      const k1 = readJson(join(wr, `${host.node}-counters-back.json`)) as Record<string, number>;
      const b = readJson(join(wr, `${host.node}-counters-after.json`)) as Record<string, number>;
      const d = (x: Record<string, number>, y: Record<string, number>, n: string) => (y[n] ?? 0) - (x[n] ?? 0);
      const dropped = d(a, b, 'drop_out_dsr_unsolicited');
      const atHost = lost.filter((x) => x.host === host.node).length;
      c.check(
        dropped <= atHost &&
          d(k1, b, 'drop_out_dsr_unsolicited') === 0 &&
          (b['drop_internal_error'] ?? 0) === (a['drop_internal_error'] ?? 0),
        `${host.node}: replies dropped as drop_out_dsr_unsolicited (no worker had their flow) are among the lost copies its links show, none after the regroup; no internal error`,
        `drop_out_dsr_unsolicited +${dropped} (kill to regroup +${d(k0, k1, 'drop_out_dsr_unsolicited')}, after it +${d(k1, b, 'drop_out_dsr_unsolicited')}), lost reply copies at ${host.node}'s links ${atHost}; ` +
          `dsr_flows_learned_midstream +${d(a, b, 'dsr_flows_learned_midstream')} (kill to regroup +${d(k0, k1, 'dsr_flows_learned_midstream')}: the other worker recording the dead one's flows)`,
      );
      // the restarted worker's flows, from its /status row (host-agent/workers.ts: flowSnapshot)
      const row = (readJson(join(wr, `${host.node}-status-after.json`)) as { workers?: { flowSnapshot?: HostFlowSnapshotRow }[] })
        .workers?.[host.worker]?.flowSnapshot;
      const carried = row === undefined ? 0 : row.dsrRestored + row.dsrReplayed;
      c.check(
        row !== undefined && carried > 0,
        `${host.node}: the restarted worker ${host.worker} carried its flows (its flow snapshot and journal, and the other worker's records of its share)`,
        row === undefined
          ? 'no flowSnapshot in its /status row (no --state-dir?)'
          : `dsr_flows_restored ${row.dsrRestored}, dsr_flows_replayed ${row.dsrReplayed} (of them caught up in the regroup ${row.dsrCaughtUp}), outbound NAT ${row.snatRestored}; sets read: ${row.setsRead.join(', ')}; /counters dsr_flows_restored +${d(k0, k1, 'dsr_flows_restored')}, dsr_flows_replayed +${d(k0, b, 'dsr_flows_replayed')}`,
      );
    }
  }

  // 4. the connections and requests: each at its Maglev backend; none failed (a stall is a failure now)
  const expect = expectedBackend(config, vip, 6, port);
  const failedHold = hold.records.filter((x) => !x.ok);
  const wrongHold = hold.records.filter((x) => x.backends.length !== 1 || x.backends[0] !== expect(x.sourceAddress, x.sourcePort));
  c.check(
    hold.records.length > 0 && failedHold.length === 0 && wrongHold.length === 0,
    `all ${hold.records.length} long-lived connections answered all along by the backend the Maglev table names; none failed, none stalled`,
    `${failedHold.length} failed, ${failedHold.filter((x) => stalled.has(flowOf(x))).length} of them stalled (${fmtCounts(countBy(failedHold, (x) => x.error ?? '?'))}), ${wrongHold.length} elsewhere; ${hold.summary.answered} requests answered; longest wait ${hold.summary.maxGapMs} ms`,
  );
  const bad = http.records.filter((x) => !x.ok);
  const wrongHttp = http.records.filter((x) => x.ok && x.backend !== expect(x.sourceAddress, x.sourcePort));
  c.check(
    http.records.length > 0 && bad.length === 0 && wrongHttp.length === 0,
    `the steady stream across both kills: ${http.records.length} requests, none failed or stalled, each at its Maglev backend`,
    `${bad.length} failed, ${bad.filter((x) => stalled.has(flowOf(x))).length} of them stalled; ${wrongHttp.length} elsewhere`,
  );
  // a reset of a live connection: an RST from the server side before that connection's FINs both went by
  // (after them, a late duplicate ACK for a socket the backend already closed draws an RST: plain TCP)
  const fr = tsharkFields(
    clientPcap,
    ['ip.src', 'tcp.srcport', 'ip.dst', 'tcp.dstport', 'tcp.flags.fin', 'tcp.flags.reset'],
    'tcp.flags.fin == 1 || tcp.flags.reset == 1',
  );
  const fins = new Map<string, number>();
  let liveRst = 0;
  let closedRst = 0;
  let clientRst = 0;
  for (const [src, sport, dst, dport, fin, reset] of fr ?? []) {
    const fromServer = Number(sport) === port;
    const conn = fromServer ? `${dst}:${dport}` : `${src}:${sport}`;
    if (fin === '1' || fin === 'True') fins.set(conn, (fins.get(conn) ?? 0) | (fromServer ? 2 : 1));
    if (reset !== '1' && reset !== 'True') continue;
    if (!fromServer) clientRst++;
    else if (fins.get(conn) === 3) closedRst++;
    else liveRst++;
  }
  c.check(
    fr !== null && liveRst === 0,
    'no live connection reset by the server side at the client (tshark)',
    fr === null
      ? 'tshark unavailable'
      : `${liveRst} RST from port ${port} before the connection's FINs; ${closedRst} after both (a late ACK for a closed socket); ${clientRst} sent by the client (its timeouts)`,
  );

  // server first: the answer comes after the restart, to the restarted worker, which needs the flow it had
  if (f.get('slow-ms') !== undefined && host !== undefined) {
    const slowMs = Number(need(f, 'slow-ms'));
    const slow = readClientJson(join(wr, 'slow.json'), 'http');
    const hostNics = new Set(config.nics.filter((n) => n.host === host.node).map((n) => n.name));
    const workers = 2; // the scenario's lab_workers_env 2
    const ofKilled = slow.records.filter((r) => {
      if (!r.ok || !hostNics.has(r.backend ?? '') || r.sourceAddress === null || r.sourcePort === null) return false;
      const a = ip(r.sourceAddress);
      return steerWorker(steeringKeyOfEnd(a.family, a.words, r.sourcePort), workers) === host.worker;
    });
    const bad = slow.records.filter((r) => !r.ok);
    const lat = ofKilled.map((r) => Math.round(Number(r.latencyMs))).sort((x, y) => x - y);
    c.check(
      slow.records.length > 0 && bad.length === 0 && ofKilled.length > 0,
      `the ${slow.records.length} server-first requests opened just before the host worker kill were all answered, ${ofKilled.length} of them through ${host.node}'s restarted worker ${host.worker} (answered after its restart)`,
      `${bad.length} failed (${fmtCounts(countBy(bad, (r) => r.error ?? '?'))}); those of the restarted worker answered after ${lat.length > 0 ? `${lat[0]}-${lat.at(-1)}` : '-'} ms (the server waits ${slowMs} ms)`,
    );
  }

  // the host's probes: a regroup's probe lost is one failure, never downThreshold in a row
  if (host !== undefined) {
    const probes = (readJson(join(wr, `${host.node}-status-end.json`)) as { probes: { nic: string; state: string }[] }).probes;
    c.check(
      probes.length > 0 && probes.every((p) => p.state === 'up'),
      `${host.node}: every probe still up at the end`,
      probes.map((p) => `${p.nic} ${p.state}`).join(', '),
    );
  }

  // 5. no reordering within a flow
  // a segment lost on the way and retransmitted arrives after later ones: the loss is judged above
  const notLost = (side: 'reply' | 'request') => (p: CapturedPacket) => !lostKeys[side].has(tcpKey(p, side === 'reply') ?? '');
  const r1 = replyReorders(client.filter(notLost('reply')), port, 'reply');
  const req = nics.map((n) => replyReorders(n.pkts.filter(notLost('request')), port, 'request'));
  const reordered = [...r1.reordered, ...req.flatMap((r) => r.reordered)];
  c.check(
    r1.segments > 0 && reordered.length === 0,
    'no reordering within a flow: replies at the client, requests at the backends',
    `${r1.flows} flows, ${r1.segments} reply segments at the client; ${req.reduce((s, r) => s + r.segments, 0)} request segments at the backends; ${reordered.length} out of order${reordered.length > 0 ? `: ${reordered.slice(0, 3).join('; ')}` : ''}`,
  );
  return c;
}
