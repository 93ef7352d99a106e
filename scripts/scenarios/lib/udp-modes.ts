// Verifies scenario 02 from the backends' captures: UDP echo through the VIP; the 5-tuple spreads one
// client's flows over every backend; the 3-tuple and the 2-tuple keep every flow of one client on one
// backend while different clients spread.
// Usage: node verify.js udp-modes --run RUNDIR --vip ADDR --five PORT --three PORT --two PORT
//        --five-json F --three-json F --two-json F --single-source ADDR
import { join } from 'node:path';
import { readClientRecordsOf } from '../../lab/client.js';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields } from './check.js';

interface UdpRecord {
  source: string;
  localPort: number;
  ok: boolean;
  backend: string | null;
}

/** The flows of a lab client udp run (client.js udp --json FILE; a source port it never learnt is -1). */
function readUdpRecords(path: string): UdpRecord[] {
  return readClientRecordsOf(path, 'udp').map((r) => ({
    source: r.sourceAddress ?? '',
    localPort: r.sourcePort ?? -1,
    ok: r.ok,
    backend: r.backend?.trim() || null,
  }));
}

export function verifyUdpModes(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const vipCfg = config.vips.find((v) => v.address.text === vip)!;
  const ports = { five: Number(need(f, 'five')), three: Number(need(f, 'three')), two: Number(need(f, 'two')) };
  const rules = Object.fromEntries(
    Object.entries(ports).map(([k, p]) => [k, vipCfg.rules.find((r) => r.frontendPort === p && r.protocols.includes(17))!]),
  );
  c.check(
    rules.five!.distribution === 5 && rules.three!.distribution === 3 && rules.two!.distribution === 2,
    'the rules use 5-, 3- and 2-tuple distribution',
    `ports ${ports.five}, ${ports.three}, ${ports.two}`,
  );
  const pool = config.pools.find((p) => p.name === rules.five!.pool)!;
  const nics = pool.backends.map((b) => config.nics.find((n) => n.name === b.nic)!);

  // what each backend received: (client address, client port, backend port)
  const seen: { nic: string; src: string; sport: number; dport: number }[] = [];
  for (const n of nics) {
    const dip = (vipCfg.address.family === 4 ? n.address4 : n.address6)!.text;
    for (const p of loadCapture(join(run, 'pcaps', `${n.name}.pcap`))) {
      const ip = p.d.first('ipv4') ?? p.d.first('ipv6');
      const u = p.d.first('udp');
      if (ip === undefined || u === undefined || ip.dst !== dip) continue;
      seen.push({ nic: n.name, src: ip.src, sport: u.srcPort, dport: u.dstPort });
    }
  }

  const modes: [keyof typeof ports, string][] = [
    ['five', '5-tuple'],
    ['three', '3-tuple'],
    ['two', '2-tuple'],
  ];
  for (const [k, label] of modes) {
    const recs = readUdpRecords(need(f, `${k}-json`));
    const ok = recs.filter((r) => r.ok);
    c.check(
      recs.length > 0 && ok.length === recs.length,
      `${label}: every echo through ${vip}:${ports[k]} came back`,
      `${ok.length} of ${recs.length}`,
    );
    const port = rules[k]!.backendPort;
    const got = seen.filter((s) => s.dport === port);
    c.check(
      got.length === recs.length,
      `${label}: the backends received one datagram per flow`,
      `${got.length} received, ${recs.length} flows`,
    );
    // what the client was told (the echo names the backend) agrees with the captures
    const byFlow = new Map(got.map((s) => [`${s.src}:${s.sport}`, s.nic]));
    const disagree = ok.filter((r) => r.source && byFlow.get(`${r.source}:${r.localPort}`) !== r.backend).length;
    c.check(disagree === 0, `${label}: the backend in each echo is the one the capture shows`, `${disagree} disagree`);
    const perClient = new Map<string, Set<string>>();
    for (const s of got) perClient.set(s.src, (perClient.get(s.src) ?? new Set()).add(s.nic));
    const backends = new Set(got.map((s) => s.nic));
    if (k === 'five') {
      const single = need(f, 'single-source');
      const set = perClient.get(single) ?? new Set();
      c.check(
        set.size === nics.length,
        `${label}: one client's flows spread over all ${nics.length} backends`,
        `${single}: ${fmtCounts(
          countBy(
            got.filter((s) => s.src === single),
            (s) => s.nic,
          ),
        )}`,
      );
    } else {
      const multi = [...perClient.values()].filter((s) => s.size > 1).length;
      c.check(
        perClient.size > 1 && multi === 0,
        `${label}: every flow of one client lands on one backend`,
        `${perClient.size} clients, ${multi} on more than one backend`,
      );
      c.check(
        backends.size === nics.length,
        `${label}: different clients spread over all ${nics.length} backends`,
        fmtCounts(countBy(got, (s) => s.nic)),
      );
    }
  }
  // tshark, independently: the datagrams each backend received on the three backend ports
  const bports = [rules.five!.backendPort, rules.three!.backendPort, rules.two!.backendPort];
  let tsharkTotal = 0;
  let haveTshark = true;
  for (const n of nics) {
    const dip = (vipCfg.address.family === 4 ? n.address4 : n.address6)!.text;
    const rows = tsharkFields(
      join(run, 'pcaps', `${n.name}.pcap`),
      ['udp.dstport'],
      `${vipCfg.address.family === 4 ? 'ip' : 'ipv6'}.dst==${dip} && udp`,
      [],
    );
    if (rows === null) {
      haveTshark = false;
      break;
    }
    tsharkTotal += rows.filter((r) => bports.map(String).includes(r[0]!)).length;
  }
  const ours = seen.filter((s) => bports.includes(s.dport)).length;
  c.check(
    haveTshark && tsharkTotal === ours,
    'tshark counts the same datagrams at the backends',
    haveTshark ? `tshark ${tsharkTotal}, slbx ${ours}` : 'tshark missing',
  );
  return c;
}
