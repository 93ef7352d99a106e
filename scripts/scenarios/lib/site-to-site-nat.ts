#!/usr/bin/env node
// Scenario 40 (site-to-site-nat, issue 15 point 5): two tenants with the same addresses (192.0.2.10 in VNI
// 5001 and in VNI 5002, examples/two-tenants-outbound.yaml) open connections to one remote server through
// one public frontend IP. The verdict from the server's capture and records, the VMs' port captures, the
// host's fabric capture (slbx's codecs, tshark recounts), the client tool's records and the host counters.
//
//   node dist/scripts/scenarios/lib/site-to-site-nat.js verify --run DIR --server ADDR --port P
//        --frontend IP --host H --tenant NIC:VNI:CLIENT_JSON --tenant ... --connections N
//     reads DIR/pcaps/{server,H,NIC...}.pcap, DIR/snat-server.json, each tenant's client JSON and
//     DIR/counters-H-{before,after}.json. Passes when: every tenant's N connections completed (the client's
//     records: every byte echoed, closed cleanly) and the server saw each from the frontend IP; the server's
//     capture holds no packet to or from its port with another address than the frontend IP (codecs and
//     tshark); no two connections shared a frontend port (the remote endpoint is one); every reply the MUXes
//     sent to the host for a tenant's frontend port carried that tenant's VNI; at each VM's port, every
//     packet from the server went to a port of that tenant's own connections, and each of its connections
//     got its SYN-ACK there; the host translated both ways and dropped nothing for a wrong VNI, exhaustion
//     or a missing flow.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Checks, flagsOf, loadCapture, need, tsharkFields, type CapturedPacket } from './check.js';
import type { SnatClientReport } from '../../lab/snat-client.js';
import type { SnatServerRecords } from '../../lab/snat-server.js';

interface L4 {
  proto: 'tcp' | 'udp';
  src: string;
  dst: string;
  sport: number;
  dport: number;
  flags: number;
  vni: number | null;
}

/** Every IP packet with TCP or UDP in a frame, outer and inner, with the VXLAN VNI it travelled in (or null). */
function l4sOf(p: CapturedPacket): L4[] {
  const out: L4[] = [];
  let ip: { src: string; dst: string } | null = null;
  let vni: number | null = null;
  for (const l of p.d.layers) {
    if (l.layer === 'vxlan') vni = l.vni;
    else if (l.layer === 'ipv4' || l.layer === 'ipv6') ip = { src: l.src, dst: l.dst };
    else if ((l.layer === 'tcp' || l.layer === 'udp') && ip !== null) {
      out.push({
        proto: l.layer,
        src: ip.src,
        dst: ip.dst,
        sport: l.srcPort,
        dport: l.dstPort,
        flags: l.layer === 'tcp' ? l.flags : 0,
        vni: l.layer === 'tcp' || l.layer === 'udp' ? vni : null,
      });
    }
  }
  return out;
}

interface Tenant {
  nic: string;
  vni: number;
  report: SnatClientReport;
}

export function verify(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const server = need(f, 'server');
  const port = Number(need(f, 'port'));
  const frontend = need(f, 'frontend');
  const host = need(f, 'host');
  const n = Number(need(f, 'connections'));
  const tenants: Tenant[] = argv
    .flatMap((a, i) => (a === '--tenant' ? [argv[i + 1] ?? ''] : []))
    .map((t) => {
      const [nic, vni, file] = t.split(':');
      if (!nic || !vni || !file) throw new Error(`--tenant NIC:VNI:CLIENT_JSON, got ${JSON.stringify(t)}`);
      return { nic, vni: Number(vni), report: JSON.parse(readFileSync(file, 'utf8')) as SnatClientReport };
    });
  if (tenants.length < 2) throw new Error('give two --tenant NIC:VNI:CLIENT_JSON or more');
  const c = new Checks();
  const cap = (name: string) => join(run, 'pcaps', `${name}.pcap`);

  // 1. the client tool's records: every connection completed, seen from the frontend IP
  for (const t of tenants) {
    const r = t.report;
    c.check(
      r.tcp.opened === n && r.tcp.ok === n,
      `${t.nic}: its ${n} connections completed (every byte echoed, closed cleanly)`,
      `opened ${r.tcp.opened}, ok ${r.tcp.ok}, failed ${r.tcp.failed}, reset ${r.tcp.reset}`,
    );
    const seen = new Set(r.tcpRecords.map((x) => x.seenSrc));
    c.check(seen.size === 1 && seen.has(frontend), `${t.nic}: the server saw every one from ${frontend}`, [...seen].join(', '));
  }

  // 2. the server's own records: one source address, no frontend port twice
  const rec = JSON.parse(readFileSync(join(run, 'snat-server.json'), 'utf8')) as SnatServerRecords;
  const conns = rec.tcp.filter((x) => x.dport === port);
  const srcs = new Set(conns.map((x) => x.src));
  c.check(
    conns.length === n * tenants.length && srcs.size === 1 && srcs.has(frontend),
    `the server recorded ${n * tenants.length} connections, all from ${frontend}`,
    `${conns.length} from ${[...srcs].join(', ')}`,
  );
  const ports = new Set(conns.map((x) => x.sport));
  c.check(
    ports.size === conns.length,
    'no two connections shared a frontend port (one remote endpoint)',
    `${ports.size} distinct of ${conns.length}`,
  );
  // the server writes its "SRC <address> <port>" line, then echoes every byte it reads
  const bytesOk = conns.filter(
    (x) => x.end === 'fin' && x.bytesIn > 0 && x.bytesOut === x.bytesIn + Buffer.byteLength(`SRC ${x.src} ${x.sport}\n`),
  ).length;
  c.check(bytesOk === conns.length, 'the server echoed every byte and saw each close cleanly', `${bytesOk} of ${conns.length}`);

  // which tenant each frontend port belongs to, from the clients' records (what the server told each)
  const tenantOfPort = new Map<number, Tenant>();
  for (const t of tenants) for (const x of t.report.tcpRecords) if (x.seenPort !== null) tenantOfPort.set(x.seenPort, t);

  // 3. the server's capture: nothing to or from its port with another address than the frontend IP
  const atServer = loadCapture(cap('server'));
  let toServer = 0;
  let other = 0;
  for (const p of atServer)
    for (const l of l4sOf(p)) {
      if (l.proto !== 'tcp') continue;
      if (l.dst === server && l.dport === port) {
        toServer++;
        if (l.src !== frontend) other++;
      } else if (l.src === server && l.sport === port && l.dst !== frontend) other++;
    }
  c.check(
    toServer > 0 && other === 0,
    `the server's capture: every packet of its port from and to ${frontend} (slbx's codecs)`,
    `${toServer} in, ${other} other`,
  );
  const rows = tsharkFields(cap('server'), ['ip.src', 'ip.dst'], `tcp.port == ${port}`);
  if (rows !== null) {
    const bad = rows.filter(([s, d]) => !(s === frontend || d === frontend)).length;
    c.check(
      rows.length > 0 && bad === 0,
      `the server's capture (tshark): every packet of port ${port} from or to ${frontend}`,
      `${rows.length} rows, ${bad} other`,
    );
  }

  // 4. the host's fabric side: every reply toward a tenant's frontend port came in that tenant's VNI
  const atHost = loadCapture(cap(host));
  let replies = 0;
  let wrongVni = 0;
  let unknown = 0;
  for (const p of atHost)
    for (const l of l4sOf(p)) {
      if (l.vni === null || l.proto !== 'tcp' || l.src !== server || l.dst !== frontend) continue;
      replies++;
      const t = tenantOfPort.get(l.dport);
      if (t === undefined) unknown++;
      else if (t.vni !== l.vni) wrongVni++;
    }
  c.check(
    replies > 0 && wrongVni === 0 && unknown === 0,
    `${host}'s fabric capture: each reply to a tenant's frontend port came in that tenant's VNI (inner destination ${frontend})`,
    `${replies} replies, ${wrongVni} in another VNI, ${unknown} to a port no tenant used`,
  );
  const vrows = tsharkFields(cap(host), ['vxlan.vni', 'tcp.dstport'], `vxlan && ip.src == ${server} && ip.dst == ${frontend}`);
  if (vrows !== null) {
    const bad = vrows.filter(([vni, dport]) => tenantOfPort.get(Number(dport))?.vni !== Number(vni)).length;
    c.check(vrows.length > 0 && bad === 0, `${host}'s fabric capture (tshark): VNI by frontend port`, `${vrows.length} rows, ${bad} wrong`);
  }

  // 5. each VM's port: every packet from the server went to one of that tenant's connections; each connection's SYN-ACK is there
  for (const t of tenants) {
    const local = new Set(t.report.tcpRecords.map((x) => x.localPort));
    const pk = loadCapture(cap(t.nic));
    let fromServer = 0;
    let stray = 0;
    const synAcked = new Set<number>();
    for (const p of pk)
      for (const l of l4sOf(p)) {
        if (l.src !== server || l.sport !== port) continue;
        fromServer++;
        if (!local.has(l.dport)) stray++;
        if ((l.flags & 0x12) === 0x12) synAcked.add(l.dport);
      }
    c.check(
      fromServer > 0 && stray === 0,
      `${t.nic}'s port: every packet from the server went to one of ${t.nic}'s own connections`,
      `${fromServer} packets, ${stray} to another port`,
    );
    c.check(synAcked.size === n, `${t.nic}'s port: each of its ${n} connections got its SYN-ACK there`, `${synAcked.size}`);
    const trows = tsharkFields(
      cap(t.nic),
      ['tcp.dstport'],
      `ip.src == ${server} && tcp.srcport == ${port} && tcp.flags.syn == 1 && tcp.flags.ack == 1`,
    );
    if (trows !== null) {
      const got = new Set(trows.map(([d]) => Number(d)));
      const strays = [...got].filter((d) => !local.has(d)).length;
      c.check(
        got.size === n && strays === 0,
        `${t.nic}'s port (tshark): SYN-ACKs to its own ${n} connections`,
        `${got.size}, ${strays} stray`,
      );
    }
  }

  // 6. the host's counters
  const before = JSON.parse(readFileSync(join(run, `counters-${host}-before.json`), 'utf8')) as Record<string, number>;
  const after = JSON.parse(readFileSync(join(run, `counters-${host}-after.json`), 'utf8')) as Record<string, number>;
  const moved = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  c.check(
    moved('out_snat') > 0 && moved('in_snat') > 0,
    `${host} translated both ways`,
    `out_snat +${moved('out_snat')}, in_snat +${moved('in_snat')}`,
  );
  for (const k of ['drop_in_snat_wrong_vni', 'drop_out_snat_exhausted', 'drop_in_snat_no_flow', 'drop_out_snat_no_flow'])
    c.check(moved(k) === 0, `${host}: ${k} +0`, `+${moved(k)}`);
  return c;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [cmd, ...rest] = process.argv.slice(2);
  try {
    if (cmd === 'verify') verify(rest).exit();
    else {
      process.stdout.write(
        'usage: site-to-site-nat.js verify --run DIR --server ADDR --port P --frontend IP --host H\n' +
          '         --tenant NIC:VNI:CLIENT_JSON --tenant NIC:VNI:CLIENT_JSON --connections N\n',
      );
      process.exit(cmd === '--help' || cmd === '-h' ? 0 : 2);
    }
  } catch (e) {
    process.stderr.write(`site-to-site-nat ${cmd}: ${(e as Error).message}\n`);
    process.exit(2);
  }
}
