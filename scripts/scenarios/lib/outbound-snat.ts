// Scenario 38 outbound-snat (issue 15, "What it must show", first bullet; examples/lab-outbound.yaml):
// the backends' own TCP connections and UDP flows to the remote server on the client side. Verified from
// the client tool's records (scripts/lab/snat-client.ts, one file per backend), the server's records
// (scripts/lab/snat-server.ts), the server's capture (slbx's codecs and tshark), the controller's ranges
// (slbctl snat --json) and the MUXes' and hosts' status before and after.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, need, tsharkFields } from './check.js';
import type { SnatClientReport } from '../../lab/snat-client.js';
import type { SnatServerRecords } from '../../lab/snat-server.js';

interface Range {
  ip: string;
  first: number;
  last: number;
  host: string;
  nic: string;
}

const readJson = <T>(f: string): T => JSON.parse(readFileSync(f, 'utf8')) as T;
const counterOf = (status: Record<string, unknown>, k: string): number => ((status['counters'] ?? {}) as Record<string, number>)[k] ?? 0;

/**
 * outbound-snat --run RUNDIR --clients NIC=FILE,... --client6 NIC=FILE --server-records FILE --snat FILE
 *   --frontend4 A --frontend6 A --server4 A --server6 A --tcp-port P --udp-port P --tcp N --udp M --tcp6 N --udp6 M
 *   --muxes mux1,mux2 --hosts host1,host2 (their status as RUNDIR/NAME-before.json and NAME-after.json)
 *   [--workers-status HOST=FILE] (a host agent with 2 workers: its /status after the traffic)
 */
export function verifyOutboundSnat(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const c = new Checks();
  const fe4 = need(f, 'frontend4');
  const fe6 = need(f, 'frontend6');
  const srv4 = need(f, 'server4');
  const srv6 = need(f, 'server6');
  const tcpPort = Number(need(f, 'tcp-port'));
  const udpPort = Number(need(f, 'udp-port'));
  const want = { tcp: Number(need(f, 'tcp')), udp: Number(need(f, 'udp')), tcp6: Number(need(f, 'tcp6')), udp6: Number(need(f, 'udp6')) };
  const snat = readJson<{ ranges: Range[] }>(need(f, 'snat'));
  const inRange = (nic: string, ip: string, port: number | null) =>
    port !== null && snat.ranges.some((r) => r.nic === nic && r.ip === ip && port >= r.first && port <= r.last);

  // 1. the client tool's records: every connection and flow completed, each from its own nic's ports
  const clients: { nic: string; six: boolean; rep: SnatClientReport }[] = [];
  for (const kv of need(f, 'clients').split(',')) {
    const [nic, file] = kv.split('=') as [string, string];
    clients.push({ nic, six: false, rep: readJson<SnatClientReport>(file) });
  }
  {
    const [nic, file] = need(f, 'client6').split('=') as [string, string];
    clients.push({ nic, six: true, rep: readJson<SnatClientReport>(file) });
  }
  for (const { nic, six, rep } of clients) {
    const fe = six ? fe6 : fe4;
    const nt = six ? want.tcp6 : want.tcp;
    const nu = six ? want.udp6 : want.udp;
    const fam = six ? 'IPv6' : 'IPv4';
    c.check(
      rep.tcp.opened === nt && rep.tcp.ok === nt,
      `${nic} (${fam}): all ${nt} TCP connections completed (connected, every byte echoed, closed cleanly)`,
      `ok ${rep.tcp.ok}, failed ${rep.tcp.failed}, reset ${rep.tcp.reset}; ${fmtCounts(
        countBy(
          rep.tcpRecords.filter((r) => r.error),
          (r) => r.error!,
        ),
      )}`,
    );
    c.check(
      rep.udp.opened === nu && rep.udp.ok === nu,
      `${nic} (${fam}): all ${nu} UDP flows answered, every exchange`,
      `ok ${rep.udp.ok}, failed ${rep.udp.failed}, retries ${rep.udp.retries}`,
    );
    const recs = [...rep.tcpRecords, ...rep.udpRecords];
    const bad = recs.filter((r) => r.seenSrc !== fe || !inRange(nic, fe, r.seenPort));
    c.check(
      bad.length === 0,
      `${nic} (${fam}): the server saw every one from ${fe}, on a port of ${nic}'s own ranges`,
      bad.length === 0 ? `${recs.length} of ${recs.length}` : `${bad.length} not: e.g. ${bad[0]!.seenSrc}:${bad[0]!.seenPort}`,
    );
    const bytes = rep.tcpRecords.reduce((a, r) => a + r.bytesEchoed, 0);
    const sent = rep.tcpRecords.reduce((a, r) => a + r.bytesSent, 0);
    c.check(
      sent > 0 && bytes === sent,
      `${nic} (${fam}): every reply reached the DIP that opened the flow (each connection's socket on ${nic} got its own bytes back)`,
      `${bytes} of ${sent} bytes echoed`,
    );
  }
  // A flow is its 5-tuple: a flow's socket that closed may leave its local port to a later flow's socket
  // (the kernel picks ephemeral ports at random), and the two are then one flow to the NAT and to the
  // server (the same DIP:port -> server:port, so the same frontend port): counted by 5-tuple.
  const udpAll = clients.flatMap((x) =>
    x.rep.udpRecords.map((r) => ({ ...r, nic: x.nic, tuple: `${x.nic} ${x.six ? 6 : 4} ${r.localPort}` })),
  );
  const tuples = new Map<string, Set<string>>(); // frontend IP and port -> the 5-tuples seen on it
  for (const r of udpAll) {
    const k = `${r.seenSrc} ${r.seenPort}`;
    if (!tuples.has(k)) tuples.set(k, new Set());
    tuples.get(k)!.add(r.tuple);
  }
  const shared = [...tuples].filter(([, t]) => t.size > 1);
  const udpTuples = new Set(udpAll.map((r) => r.tuple)).size;
  c.check(
    shared.length === 0 && udpAll.every((r) => r.seenSources === 1),
    'no two UDP flows (5-tuples) shared a frontend IP and port toward the server, and each kept one for its life (client records)',
    `${tuples.size} frontend ports for ${udpTuples} 5-tuples of ${udpAll.length} flows${
      shared.length > 0 ? `; shared: ${shared.slice(0, 3).map(([k, t]) => `${k} by ${[...t].join(', ')}`)}` : ''
    }`,
  );

  // 2. the server's records: only the frontend IPs as sources, and no two live TCP connections on one
  // (frontend IP, port, server address, server port)
  const srv = readJson<SnatServerRecords>(need(f, 'server-records'));
  const nTcp = 4 * want.tcp + want.tcp6;
  const nUdp = 4 * want.udp + want.udp6;
  const srcs = countBy([...srv.tcp, ...srv.udp], (r) => r.src);
  c.check(
    srv.tcp.length === nTcp && srv.udp.length === udpTuples,
    `the server recorded ${nTcp} TCP connections and a UDP flow for each of the ${udpTuples} 5-tuples (${nUdp} flows opened)`,
    `${srv.tcp.length} TCP, ${srv.udp.length} UDP`,
  );
  c.check(
    [...srcs.keys()].every((s) => s === fe4 || s === fe6),
    `the server saw no source but ${fe4} and ${fe6}`,
    fmtCounts(srcs),
  );
  c.check(
    srv.tcp.every((r) => r.end === 'fin'),
    'every TCP connection the server saw ended by a FIN',
    fmtCounts(countBy(srv.tcp, (r) => r.end)),
  );
  const byTuple = new Map<string, { openedMs: number; closedMs: number }[]>();
  for (const r of srv.tcp) {
    const k = `${r.src} ${r.sport} ${r.dst} ${r.dport}`;
    const l = byTuple.get(k) ?? [];
    l.push({ openedMs: r.openedMs, closedMs: r.closedMs ?? Number.MAX_SAFE_INTEGER });
    byTuple.set(k, l);
  }
  let overlaps = 0;
  for (const l of byTuple.values()) {
    l.sort((a, b) => a.openedMs - b.openedMs);
    for (let i = 1; i < l.length; i++) if (l[i]!.openedMs < l[i - 1]!.closedMs) overlaps++;
  }
  c.check(
    overlaps === 0,
    'no two live TCP connections shared (frontend IP, port, server endpoint) (server records, open..close intervals)',
    `${byTuple.size} tuples for ${srv.tcp.length} connections, ${overlaps} overlapping`,
  );
  const dgrams = srv.udp.reduce((a, r) => a + r.datagrams, 0);
  const exch = udpAll.reduce((a, r) => a + r.answered, 0);
  c.check(
    dgrams >= exch,
    'the server received at least every UDP exchange the clients saw answered',
    `${dgrams} datagrams, ${exch} exchanges answered`,
  );

  // 3. the server's capture (its port on the client side): every packet toward the echo ports from a
  // frontend IP, none from a backend's address; our codecs, then tshark on the same file
  const file = join(run, 'pcaps', 'server.pcap');
  const pkts = loadCapture(file);
  const toServer = pkts.filter((p) => {
    const l4 = p.d.first('tcp') ?? p.d.first('udp');
    const ip = p.d.first('ipv4') ?? p.d.first('ipv6');
    return (
      l4 !== undefined && ip !== undefined && (ip.dst === srv4 || ip.dst === srv6) && (l4.dstPort === tcpPort || l4.dstPort === udpPort)
    );
  });
  const srcOf = (p: (typeof pkts)[number]) => (p.d.first('ipv4') ?? p.d.first('ipv6'))!.src;
  const capSrcs = countBy(toServer, srcOf);
  c.check(
    toServer.length >= 2 * (nTcp + nUdp) && [...capSrcs.keys()].every((s) => s === fe4 || s === fe6),
    `server capture: every packet to the echo ports came from ${fe4} or ${fe6}`,
    `${toServer.length} packets: ${fmtCounts(capSrcs)}`,
  );
  const fromServer = pkts.filter((p) => {
    const ip = p.d.first('ipv4') ?? p.d.first('ipv6');
    return ip !== undefined && (ip.src === srv4 || ip.src === srv6);
  });
  const dsts = countBy(fromServer, (p) => (p.d.first('ipv4') ?? p.d.first('ipv6'))!.dst);
  c.check(
    [...dsts.keys()].every((d) => d === fe4 || d === fe6),
    `server capture: the server answered only ${fe4} and ${fe6}`,
    `${fromServer.length} packets: ${fmtCounts(dsts)}`,
  );
  const dip = pkts.filter((p) => {
    const ip = p.d.first('ipv4') ?? p.d.first('ipv6');
    return ip !== undefined && (ip.src.startsWith('192.0.2.') || ip.src.startsWith('2001:db8:d:'));
  });
  c.check(dip.length === 0, 'server capture: no packet from a backend address (192.0.2.0/24, 2001:db8:d::/64)', `${dip.length}`);
  const filter = `(tcp.dstport == ${tcpPort} || udp.dstport == ${udpPort}) && (ip.dst == ${srv4} || ipv6.dst == ${srv6})`;
  const ts = tsharkFields(file, ['frame.number', 'ip.src', 'ipv6.src'], filter, []);
  if (ts !== null) {
    const tsSrcs = countBy(ts, (row) => (row[1] !== undefined && row[1] !== '' ? row[1] : (row[2] ?? '?')));
    c.check(
      ts.length === toServer.length && [...tsSrcs.keys()].every((s) => s === fe4 || s === fe6),
      'tshark: the same packets to the echo ports, from the frontend IPs only',
      `tshark ${ts.length}: ${fmtCounts(tsSrcs)}`,
    );
  }

  // 4. the MUXes: their flow tables did not grow, no new flow was placed, the replies were forwarded by
  // the range table; none dropped for want of an owner
  let forwarded = 0;
  for (const m of need(f, 'muxes').split(',')) {
    const b = readJson<Record<string, unknown>>(join(run, `${m}-before.json`));
    const a = readJson<Record<string, unknown>>(join(run, `${m}-after.json`));
    const flows = (s: Record<string, unknown>) => {
      const fl = s['flows'] as { ipv4: number; ipv6: number };
      return fl.ipv4 + fl.ipv6;
    };
    const d = (k: string) => counterOf(a, k) - counterOf(b, k);
    forwarded += d('snat_forwarded');
    c.check(
      flows(a) <= flows(b) && d('flow_new') === 0 && d('flow_replaced') === 0 && d('flow_untrusted_full') === 0,
      `${m}: its flow table did not grow with these flows (no flow placed)`,
      `flows ${flows(b)} -> ${flows(a)}, flow_new +${d('flow_new')}, flow_replaced +${d('flow_replaced')}`,
    );
    c.check(
      d('drop_snat_no_owner') === 0 && d('drop_snat_fragment') === 0 && d('drop_snat_not_tcp_udp') === 0,
      `${m}: no reply dropped (drop_snat_*)`,
      `no_owner +${d('drop_snat_no_owner')}, fragment +${d('drop_snat_fragment')}, not_tcp_udp +${d('drop_snat_not_tcp_udp')}; snat_forwarded +${d('snat_forwarded')}`,
    );
  }
  // (at least one reply per flow: every one completed; a packet lost on the way is retransmitted, so no
  // exact count is asked)
  c.check(
    forwarded >= nTcp + nUdp,
    'the MUXes forwarded the replies by the range table (snat_forwarded, summed, at least one per flow)',
    `${forwarded} forwarded; the server sent ${fromServer.length} in its capture`,
  );

  // 5. the host agents translated both ways
  let out = 0;
  let back = 0;
  for (const h of need(f, 'hosts').split(',')) {
    // GET /counters: flat
    const b = readJson<Record<string, number>>(join(run, `${h}-before.json`));
    const a = readJson<Record<string, number>>(join(run, `${h}-after.json`));
    const d = (k: string) => (a[k] ?? 0) - (b[k] ?? 0);
    out += d('out_snat');
    back += d('in_snat');
    // a reply that finds no flow where it lands (a worker that is not its flow's, or after a restart) is
    // drop_in_snat_no_flow; drop_in_not_vip_of_vni stays checked too: before 2026-12-07 such a reply went
    // on to the VIP rules and was counted there (host-agent/data-plane.ts snatIn)
    const drops = [
      'drop_in_not_vip_of_vni',
      'drop_out_snat_exhausted',
      'drop_out_snat_no_range',
      'drop_out_snat_no_flow',
      'drop_in_snat_no_flow',
      'drop_in_snat_wrong_vni',
    ];
    const dd = drops.map((k) => [k, d(k)] as const).filter(([, n]) => n !== 0);
    c.check(
      dd.length === 0,
      `${h}: no outbound NAT drop (nor a reply of no flow)`,
      dd.length === 0 ? 'none' : dd.map(([k, n]) => `${k} +${n}`).join(', '),
    );
  }
  c.check(
    out >= toServer.length && back >= nTcp + nUdp,
    'the host agents translated every packet out the server saw, and the replies back (out_snat, in_snat)',
    `out_snat +${out} (${toServer.length} at the server), in_snat +${back} (${fromServer.length} from it)`,
  );

  // 6. a host agent with workers (docs/outbound.md, "Workers"): every worker carried outbound NAT flows
  // (each its own engine over the same chunks), and /status's snat section is the sum of theirs
  const ws = f.get('workers-status');
  if (ws !== undefined) {
    const [h, file] = ws.split('=') as [string, string];
    const st = readJson<{ io?: string; workers?: { snat?: { flows: number } }[]; snat?: { flows?: number } }>(file);
    const workers = st.workers ?? [];
    const flows = workers.map((w) => w.snat?.flows ?? 0);
    c.check(
      st.io === 'ring' && workers.length === 2,
      `${h}: its host agent ran with 2 worker threads on the ring path`,
      `io ${st.io}, ${workers.length} workers`,
    );
    c.check(
      flows.length > 0 && flows.every((n) => n > 0),
      `${h}: every worker carried outbound NAT flows (its report's snat.flows, TIME-WAIT included)`,
      flows.join(' + '),
    );
    const sum = flows.reduce((a, b) => a + b, 0);
    c.check(st.snat?.flows === sum, `${h}: /status snat.flows is the workers' sum`, `${st.snat?.flows} = ${sum}`);
  }
  return c;
}
