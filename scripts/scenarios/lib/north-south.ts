// Verifies a north-south TCP run from its captures (scenario 01, 03 and the demo):
//   client -> router -> MUX: every client packet reaches a MUX and leaves it VXLAN-encapsulated, byte for
//   byte, to the host of the backend the MUX chose, with the pool's VNI;
//   host -> backend: the backend sees destination DIP:backend-port;
//   backend -> host -> router -> client: replies leave the host from VIP:frontend-port (DSR) and reach
//   the client; not one reply crosses a MUX.
// Usage: node north-south.js --run RUNDIR --vip ADDR --port N --requests N --client-json FILE [--account FILE]
// RUNDIR holds config.yaml and pcaps/<node>.pcap for client1, every mux (fabric side), every host (fabric
// side) and every nic (the backend's eth0).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseIpAddr } from '../../../shared/addr.js';
import { readClientRecordsOf } from '../../lab/client.js';
import {
  Checks,
  countBy,
  flagsOf,
  fmtCounts,
  hex,
  innerIpPacket,
  loadCapture,
  loadConfig,
  need,
  outerIpPacket,
  tsharkFields,
  type CapturedPacket,
} from './check.js';

interface ClientRecord {
  localPort: number;
  ok: boolean;
  backend: string | null;
}

/** The per-request records of a lab client http run (client.js http --json FILE; a source port it never learnt is -1). */
export function readClientRecords(path: string): ClientRecord[] {
  return readClientRecordsOf(path, 'http').map((r) => ({ localPort: r.sourcePort ?? -1, ok: r.ok, backend: r.backend?.trim() || null }));
}

function ipOf(p: CapturedPacket) {
  return p.d.layers.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6') as
    { src: string; dst: string; off: number; layer: string } | undefined;
}

export function verifyNorthSouth(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = parseIpAddr(need(f, 'vip'))!.text;
  const port = Number(need(f, 'port'));
  const requests = Number(need(f, 'requests'));
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const cap = (node: string) => loadCapture(join(run, 'pcaps', `${node}.pcap`));
  const vipCfg = config.vips.find((v) => v.address.text === vip)!;
  const rule = vipCfg.rules.find((r) => r.frontendPort === port && r.protocols.includes(6))!;
  const pool = config.pools.find((p) => p.name === rule.pool)!;
  const network = config.networks.find((n) => n.name === pool.network)!;
  const nics = pool.backends.map((b) => config.nics.find((n) => n.name === b.nic)!);
  const nicByMac = new Map(nics.map((n) => [Buffer.from(n.mac).toString('hex'), n]));
  // the provider addresses VXLAN travels between: IPv4 or, with an IPv6 underlay, address6
  const paOf = (n: { address: { text: string }; address6: { text: string } | null }) =>
    config.fabric.underlay === 'ipv6' ? n.address6!.text : n.address.text;
  const hostPa = new Map(config.hosts.map((h) => [h.name, paOf(h)]));
  const muxPa = new Map(config.muxes.map((m) => [m.name, paOf(m)]));
  const outerOf = (p: CapturedPacket) => p.d.layers.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6') as { src: string; dst: string };
  const dipOf = (n: (typeof nics)[number]) => (vipCfg.address.family === 4 ? n.address4 : n.address6)!.text;

  // --- the client's own account
  const records = readClientRecords(need(f, 'client-json'));
  const okRecords = records.filter((r) => r.ok);
  c.check(
    records.length === requests && okRecords.length === requests,
    `all ${requests} requests to ${vip}:${port} succeeded`,
    `${okRecords.length} ok of ${records.length}`,
  );
  const byBackend = countBy(okRecords, (r) => r.backend ?? '?');
  c.check(
    nics.every((n) => (byBackend.get(n.name) ?? 0) > 0),
    'every backend answered some',
    fmtCounts(byBackend),
  );

  // --- client capture: what the client sent to the VIP and received from it
  const client = cap('client1');
  const sent = client.filter((p) => ipOf(p)?.dst === vip && p.d.first('tcp')?.dstPort === port);
  const received = client.filter((p) => ipOf(p)?.src === vip && p.d.first('tcp')?.srcPort === port);
  c.check(
    sent.length > 0 && received.length > 0,
    'the client capture holds the conversation',
    `${sent.length} packets to the VIP, ${received.length} from it`,
  );

  // --- MUXes: arrivals and their encapsulations
  const arrivals: CapturedPacket[] = [];
  const encaps: { p: CapturedPacket; mux: string }[] = [];
  let repliesAtMux = 0;
  const dips = new Set(nics.map((n) => dipOf(n)));
  const muxOfArrival = new Map<CapturedPacket, string>();
  const hostOfPa = new Map(config.hosts.map((h) => [paOf(h), h.name]));
  for (const m of config.muxes) {
    let pk: CapturedPacket[];
    try {
      pk = cap(m.name);
    } catch {
      c.check(false, `capture of ${m.name} exists`);
      continue;
    }
    for (const p of pk) {
      // a reply anywhere on a MUX, outside or inside VXLAN: source VIP or a backend's address
      for (const l of p.d.layers) if ((l.layer === 'ipv4' || l.layer === 'ipv6') && (l.src === vip || dips.has(l.src))) repliesAtMux++;
      const ip = ipOf(p);
      if (ip === undefined) continue;
      if (p.d.first('vxlan') !== undefined) encaps.push({ p, mux: m.name });
      else if (ip.dst === vip) {
        arrivals.push(p);
        muxOfArrival.set(p, m.name);
      }
    }
  }
  c.check(
    arrivals.length === sent.length,
    'every client packet reached a MUX',
    `${sent.length} sent by the client, ${arrivals.length} arrived at MUXes`,
  );
  // client -> MUX: the same packets, the router having decremented the TTL
  const l4key = (p: CapturedPacket) => {
    const ip = outerIpPacket(p)!;
    const hl = ip[0]! >>> 4 === 4 ? (ip[0]! & 15) * 4 : 40;
    return hex(ip.subarray(hl));
  };
  const sentKeys = countBy(sent, l4key);
  const arrivedKeys = countBy(arrivals, l4key);
  const sameL4 = sentKeys.size === arrivedKeys.size && [...sentKeys].every(([k, v]) => arrivedKeys.get(k) === v);
  c.check(sameL4, "the MUXes received exactly the client's TCP segments", 'compared byte for byte above IP; the router decrements TTL');

  // MUX in -> MUX out: byte-identical inner packets, one VXLAN per arrival
  const innerKeys = countBy(encaps, (e) => hex(innerIpPacket(e.p)!));
  const arrivalKeys = countBy(arrivals, (p) => hex(outerIpPacket(p)!));
  const identical = innerKeys.size === arrivalKeys.size && [...arrivalKeys].every(([k, v]) => innerKeys.get(k) === v);
  c.check(
    identical && encaps.length === arrivals.length,
    'every arrival left its MUX VXLAN-encapsulated with the packet inside byte for byte (TTL included)',
    `${arrivals.length} arrivals, ${encaps.length} VXLAN packets`,
  );
  let wrongVni = 0;
  let wrongHost = 0;
  let wrongSrc = 0;
  const chosen = new Map<number, string>(); // client source port -> nic the MUX chose
  for (const { p, mux } of encaps) {
    const vx = p.d.first('vxlan')!;
    if (vx.vni !== network.vni) wrongVni++;
    const outer = outerOf(p);
    if (outer.src !== muxPa.get(mux)) wrongSrc++;
    const innerEth = p.d.all('eth')[1]!;
    const nic = nicByMac.get(innerEth.dst.replaceAll(':', ''));
    if (nic === undefined || hostPa.get(nic.host) !== outer.dst) wrongHost++;
    const tcp = p.d.all('tcp').at(-1);
    if (nic !== undefined && tcp !== undefined) chosen.set(tcp.srcPort, nic.name);
  }
  c.check(wrongVni === 0, `every VXLAN packet carries VNI ${network.vni}`, `${wrongVni} wrong`);
  c.check(
    wrongSrc === 0 && wrongHost === 0,
    "every VXLAN packet goes from its MUX's PA to the PA of the host of the backend named by its inner MAC",
    `${wrongSrc} wrong sources, ${wrongHost} wrong hosts`,
  );
  let disagree = 0;
  for (const r of okRecords) if (chosen.get(r.localPort) !== r.backend) disagree++;
  c.check(
    disagree === 0,
    'the backend that answered each request is the one the MUX chose for its flow',
    `${disagree} disagree of ${okRecords.length}`,
  );
  c.check(repliesAtMux === 0, 'zero reply packets crossed any MUX interface', `${repliesAtMux} seen`);

  // --- tshark, independently: VXLAN with the VNI, and the client's packet inside
  const tsRows: string[][] = [];
  let haveTshark = true;
  for (const m of config.muxes) {
    const rows = tsharkFields(
      join(run, 'pcaps', `${m.name}.pcap`),
      ['vxlan.vni', 'ip.src', 'ip.dst', 'ipv6.src', 'ipv6.dst', 'tcp.dstport'],
      'vxlan',
    );
    if (rows === null) {
      haveTshark = false;
      break;
    }
    tsRows.push(...rows);
  }
  const clientSrcs = new Set(sent.map((p) => ipOf(p)!.src));
  const innerOk = (r: string[]) => {
    const v6 = vipCfg.address.family === 6;
    // the inner header is the last of its family (the outer one, when of the same family, comes first)
    const src = (v6 ? r[3]! : r[1]!).split(',').at(-1)!;
    const dst = (v6 ? r[4]! : r[2]!).split(',').at(-1)!;
    return r[0] === String(network.vni) && clientSrcs.has(src) && dst === vip && r[5] === String(port);
  };
  const ts = tsRows;
  c.check(
    haveTshark && ts.length === encaps.length && ts.every(innerOk),
    "tshark decodes the same VXLAN packets: that VNI, and inside the client's packet to the VIP and port",
    haveTshark ? `tshark: ${ts.length} VXLAN, ${ts.filter(innerOk).length} as expected; slbx: ${encaps.length}` : 'tshark missing',
  );

  // --- hosts and backends
  let toBackends = 0;
  let wrongDst = 0;
  let repliesFromBackends = 0;
  let probes = 0;
  const gateways = new Set([network.gateway?.text, network.gateway6?.text].filter((g): g is string => g !== undefined));
  const perNic: Record<string, { dip: string; received: number; replied: number; requests: number }> = {};
  for (const n of nics) {
    const pk = cap(n.name);
    const dip = dipOf(n);
    for (const p of pk) {
      const ip = ipOf(p);
      const tcp = p.d.first('tcp');
      if (ip === undefined || tcp === undefined) continue;
      // health probes: the host agent talks to the backend from the network's gateway address
      if (gateways.has(ip.src) || gateways.has(ip.dst)) {
        probes++;
        continue;
      }
      perNic[n.name] ??= { dip, received: 0, replied: 0, requests: byBackend.get(n.name) ?? 0 };
      if (ip.dst === dip && tcp.dstPort === rule.backendPort) {
        toBackends++;
        perNic[n.name]!.received++;
      } else if (ip.src !== dip) wrongDst++;
      if (ip.src === dip && tcp.srcPort === rule.backendPort) {
        repliesFromBackends++;
        perNic[n.name]!.replied++;
      }
    }
  }
  c.check(
    toBackends === encaps.length && wrongDst === 0,
    `the backends saw the client's packets addressed to DIP:${rule.backendPort}`,
    `${toBackends} delivered of ${encaps.length} encapsulated; ${wrongDst} to other addresses`,
  );
  if (probes > 0) c.note(`the backends also exchanged ${probes} health-probe packets with their gateway address (not counted above)`);
  let dsr = 0;
  let dsrWrong = 0;
  const perHostDsr: Record<string, number> = {};
  const perHostVxlanIn: Record<string, number> = {};
  const clients = new Set(sent.map((p) => ipOf(p)!.src));
  for (const h of config.hosts) {
    perHostDsr[h.name] = 0;
    perHostVxlanIn[h.name] = 0;
    for (const p of cap(h.name)) {
      if (p.d.first('vxlan') !== undefined) {
        if (outerOf(p).dst === paOf(h)) perHostVxlanIn[h.name]!++;
        continue;
      }
      const ip = ipOf(p);
      const tcp = p.d.first('tcp');
      if (ip === undefined || tcp === undefined) continue;
      if (ip.src === vip && tcp.srcPort === port) {
        dsr++;
        perHostDsr[h.name]!++;
        if (tcp.checksumOk !== true || !clients.has(ip.dst)) dsrWrong++;
      } else if (dips.has(ip.src)) dsrWrong++; // a reply leaving un-NATed
    }
  }
  c.check(
    dsr === repliesFromBackends && dsrWrong === 0,
    `every reply left its host from ${vip}:${port} with a correct checksum (direct server return)`,
    `${repliesFromBackends} sent by backends, ${dsr} left the hosts from the VIP, ${dsrWrong} wrong`,
  );
  c.check(received.length === dsr, 'every reply reached the client', `${dsr} sent, ${received.length} received`);

  const account = f.get('account');
  if (account !== undefined) {
    const muxes = config.muxes.map((m) => ({
      name: m.name,
      pa: m.address.text,
      received: arrivals.filter((p) => muxOfArrival.get(p) === m.name).length,
      vxlanByHost: Object.fromEntries(
        countBy(
          encaps.filter((e) => e.mux === m.name),
          (e) => hostOfPa.get(outerOf(e.p).dst) ?? '?',
        ),
      ),
    }));
    writeFileSync(
      account,
      `${JSON.stringify(
        {
          vip,
          port,
          backendPort: rule.backendPort,
          vni: network.vni,
          requests: records.length,
          ok: okRecords.length,
          client: { address: [...clients].join(', '), sent: sent.length, received: received.length },
          muxes,
          hosts: config.hosts.map((h) => ({
            name: h.name,
            pa: h.address.text,
            vxlanIn: perHostVxlanIn[h.name] ?? 0,
            dsrOut: perHostDsr[h.name] ?? 0,
          })),
          nics: nics.map((n) => ({ name: n.name, host: n.host, ...perNic[n.name] })),
          repliesAtMux,
          tsharkVxlan: ts.length,
          checks: { passed: c.passes, failed: c.failures },
        },
        null,
        2,
      )}\n`,
    );
  }
  return c;
}
