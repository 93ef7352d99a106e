#!/usr/bin/env node
// Scenario 34 (dsr-unsolicited, issue 16): a backend's packets from its service ports to client-side
// addresses that never contacted the VIP, and the verdict from captures and counters.
//
//   node dist/scripts/scenarios/lib/dsr-unsolicited.js gen --config F --out FILE.pcap --nic NAME --port-mac M
//     Ethernet frames as the nic's VM sends them on its eth0 (its MAC and addresses, to its port's MAC):
//     for each target (TARGETS: client1's own address at a port that never talked to the VIP, another
//     client-side address, and client1's IPv6 address) COPIES each of a TCP SYN-ACK, TCP data and a TCP
//     RST from the service's TCP port, and a UDP datagram from its UDP port
//   node dist/scripts/scenarios/lib/dsr-unsolicited.js verify --config F --run DIR --nic NAME --host H
//        --requests N
//     reads DIR/pcaps/{NIC,router-fab,client1,host fab0 as H,every mux}.pcap, DIR/counters-H-{before,after}.json,
//     DIR/http.json. Passes when: every injected frame is on the nic's capture (it was sent into the
//     port); none of them, nor anything to the targets' ports, is on the router's fabric side, at
//     client1 or on the host's fabric interface (slbx's codecs, and tshark recounts); the host counted
//     each as drop_out_dsr_unsolicited, exactly; the N requests all succeeded and their replies reached
//     the router from the hosts (DSR) while no MUX carried any packet from the VIP's service port.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pkt } from '../../../shared/packet-builder.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../../../shared/pcap-file.js';
import { TCP_ACK, TCP_PSH, TCP_RST, TCP_SYN } from '../../../shared/tcp.js';
import { formatMac } from '../../../shared/addr.js';
import { Checks, flagsOf, loadCapture, loadConfig, need, tsharkFields, type CapturedPacket } from './check.js';
import { readClientRecords } from './north-south.js';

export const COPIES = 10;
/** Client-side destinations that never sent anything to the VIP: their ports mark the injected frames. */
export const TARGETS = [
  { addr: '198.51.100.10', port: 5555 }, // client1 itself, at a port that never talked to the VIP (the example)
  { addr: '198.51.100.200', port: 5556 }, // another client-side address
  { addr: '2001:db8:c::10', port: 5557 },
] as const;
const KINDS = ['syn-ack', 'data', 'rst', 'udp'] as const;
const TARGET_PORTS = new Set<number>(TARGETS.map((t) => t.port));

function serviceOf(config: ReturnType<typeof loadConfig>, nicName: string) {
  const nic = config.nics.find((n) => n.name === nicName);
  if (nic === undefined) throw new Error(`nic ${nicName} is not in the config`);
  const pools = new Set(config.pools.filter((p) => p.backends.some((b) => b.nic === nicName)).map((p) => p.name));
  const rules = config.vips.flatMap((v) => v.rules.filter((r) => pools.has(r.pool)).map((r) => ({ vip: v.address.text, ...r })));
  const tcp = rules.find((r) => r.protocols.includes(6));
  const udp = rules.find((r) => r.protocols.includes(17));
  if (tcp === undefined || udp === undefined) throw new Error(`nic ${nicName} serves no TCP and UDP rule`);
  return { nic, tcp, udp };
}

export function generate(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const config = loadConfig(need(f, 'config'));
  const { nic, tcp, udp } = serviceOf(config, need(f, 'nic'));
  const portMac = need(f, 'port-mac');
  const frames: Buffer[] = [];
  let seq = 1;
  for (const t of TARGETS) {
    const v6 = t.addr.includes(':');
    const src = v6 ? nic.address6?.text : nic.address4?.text;
    if (src === undefined) throw new Error(`nic ${nic.name} has no IPv${v6 ? 6 : 4} address`);
    for (const kind of KINDS) {
      for (let i = 0; i < COPIES; i++) {
        const e = pkt().eth({ src: formatMac(nic.mac), dst: portMac });
        const ip = v6 ? e.ipv6({ src, dst: t.addr }) : e.ipv4({ src, dst: t.addr, flags: 2 });
        const flags = kind === 'syn-ack' ? TCP_SYN | TCP_ACK : kind === 'data' ? TCP_ACK | TCP_PSH : TCP_RST;
        frames.push(
          kind === 'udp'
            ? ip.udp({ sport: udp.backendPort, dport: t.port }).payload(`unsolicited ${i}`).build()
            : ip
                .tcp({ sport: tcp.backendPort, dport: t.port, flags, seq: 1000 + seq++, ack: kind === 'rst' ? 0 : 7 })
                .payload(kind === 'data' ? `unsolicited data ${i}` : '')
                .build(),
        );
      }
    }
  }
  writeFileSync(
    need(f, 'out'),
    buildPcap(
      LINKTYPE_ETHERNET,
      frames.map((data, i) => ({ tsUs: i, data, origLen: data.length })),
    ),
  );
  process.stdout.write(
    `[sc34] ${frames.length} unsolicited frames from ${nic.name} (${KINDS.join(', ')}; ${COPIES} each to ${TARGETS.length} targets)\n`,
  );
}

interface L4 {
  proto: 'tcp' | 'udp';
  src: string;
  dst: string;
  sport: number;
  dport: number;
}
/** Every IP packet with TCP or UDP in a frame, outer and inner (VXLAN), as slbx's codecs decode it. */
function l4sOf(p: CapturedPacket): L4[] {
  const out: L4[] = [];
  let ip: { src: string; dst: string } | null = null;
  for (const l of p.d.layers) {
    if (l.layer === 'ipv4' || l.layer === 'ipv6') ip = { src: l.src, dst: l.dst };
    else if ((l.layer === 'tcp' || l.layer === 'udp') && ip !== null) {
      out.push({ proto: l.layer, src: ip.src, dst: ip.dst, sport: l.srcPort, dport: l.dstPort });
    }
  }
  return out;
}

export function verify(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const host = need(f, 'host');
  const requests = Number(need(f, 'requests'));
  const config = loadConfig(join(run, 'config.yaml'));
  const { nic, tcp } = serviceOf(config, need(f, 'nic'));
  const c = new Checks();
  const capPath = (name: string) => join(run, 'pcaps', `${name}.pcap`);
  const injected = (l: L4) => TARGET_PORTS.has(l.dport) && (l.src === nic.address4?.text || l.src === nic.address6?.text);
  const toTargets = (l: L4) => TARGET_PORTS.has(l.dport) || TARGET_PORTS.has(l.sport);
  const expected = TARGETS.length * KINDS.length * COPIES;

  const sent = loadCapture(capPath(nic.name)).filter((p) => l4sOf(p).some(injected)).length;
  c.check(sent === expected, `${nic.name}'s capture shows the ${expected} unsolicited frames sent into its port`, `${sent}`);

  const tsharkFilter = [...TARGET_PORTS].map((p) => `tcp.port == ${p} || udp.port == ${p}`).join(' || ');
  for (const [name, what] of [
    ['router-fab', "the router's fabric side"],
    ['client1', 'client1'],
    [host, `${host}'s fabric interface`],
  ] as const) {
    const pkts = loadCapture(capPath(name));
    const leaked = pkts.filter((p) => l4sOf(p).some(toTargets)).length;
    c.check(
      leaked === 0,
      `none of them at ${what} (slbx's codecs, ${pkts.length} packets read)`,
      `${leaked} to or from the targets' ports`,
    );
    const rows = tsharkFields(capPath(name), ['frame.number'], tsharkFilter);
    if (rows !== null) c.check(rows.length === 0, `none of them at ${what} (tshark: ${tsharkFilter})`, `${rows.length}`);
  }

  const before = JSON.parse(readFileSync(join(run, `counters-${host}-before.json`), 'utf8')) as Record<string, number>;
  const after = JSON.parse(readFileSync(join(run, `counters-${host}-after.json`), 'utf8')) as Record<string, number>;
  const moved = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  c.check(
    moved('drop_out_dsr_unsolicited') === expected,
    `${host} counted each as drop_out_dsr_unsolicited`,
    `+${moved('drop_out_dsr_unsolicited')} of ${expected}`,
  );
  c.check(moved('out_dsr') > 0, `${host} sent the good requests' replies by DSR meanwhile`, `out_dsr +${moved('out_dsr')}`);
  c.note(`${host}: dsr_flows_learned +${moved('dsr_flows_learned')}, dsr_flows_full +${moved('dsr_flows_full')}`);
  c.check(moved('dsr_flows_full') === 0, `${host}'s flow table never full`, `dsr_flows_full +${moved('dsr_flows_full')}`);

  const recs = readClientRecords(join(run, 'http.json'));
  const ok = recs.filter((r) => r.ok).length;
  c.check(recs.length === requests && ok === requests, `the ${requests} requests through the VIP all succeeded`, `${ok} of ${recs.length}`);

  // the replies: from the VIP's service port, at the router (from the hosts), never at a MUX
  const fromVip = (l: L4) => l.src === tcp.vip && l.sport === tcp.frontendPort;
  const atRouter = loadCapture(capPath('router-fab')).filter((p) => l4sOf(p).some(fromVip)).length;
  c.check(
    atRouter >= requests,
    `the replies reached the router's fabric side by DSR`,
    `${atRouter} packets from ${tcp.vip}:${tcp.frontendPort}`,
  );
  for (const m of config.muxes) {
    const atMux = loadCapture(capPath(m.name)).filter((p) => l4sOf(p).some(fromVip)).length;
    c.check(atMux === 0, `no reply at ${m.name}`, `${atMux} packets from ${tcp.vip}:${tcp.frontendPort}, outer or inner`);
    const rows = tsharkFields(capPath(m.name), ['frame.number'], `ip.src == ${tcp.vip} && tcp.srcport == ${tcp.frontendPort}`);
    if (rows !== null) c.check(rows.length === 0, `no reply at ${m.name} (tshark)`, `${rows.length}`);
  }
  return c;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [cmd, ...rest] = process.argv.slice(2);
  try {
    if (cmd === 'gen') generate(rest);
    else if (cmd === 'verify') verify(rest).exit();
    else {
      process.stdout.write(
        'usage: dsr-unsolicited.js gen --config F --out FILE.pcap --nic NAME --port-mac M\n' +
          '       dsr-unsolicited.js verify --run DIR --nic NAME --host H --requests N\n',
      );
      process.exit(cmd === '--help' || cmd === '-h' ? 0 : 2);
    }
  } catch (e) {
    process.stderr.write(`dsr-unsolicited ${cmd}: ${(e as Error).message}\n`);
    process.exit(2);
  }
}
