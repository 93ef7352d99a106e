// Scenario 15: two tenants reuse the same backend addresses on the same hosts; only the VNI tells them
// apart. `gen-forged` writes VXLAN frames that cross the tenants (tenant A's VNI carrying tenant B's VIP,
// and tenant B's VNI toward tenant A's port MAC); `tenants` verifies the run from the captures, the
// clients' records and the host agent's counters.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pkt } from '../../../shared/packet-builder.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../../../shared/pcap-file.js';
import { formatMac } from '../../../shared/addr.js';
import { TCP_SYN } from '../../../shared/tcp.js';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need } from './check.js';
import { readClientRecords } from './north-south.js';

export const FORGED_COPIES = 5;
/** The forged frames' outer UDP and inner TCP source ports: mux1's capture shows them leaving, and the check of its real traffic leaves them out. */
export const FORGED_OUTER_SPORT = 50003;
export const FORGED_INNER_SPORT = 1300;

/**
 * --out DIR --config F --mux-mac M --host-mac M --host NAME --mux-pa A --client A: frames as the MUX at
 * --mux-pa would send them (its MAC: the host agent takes a MUX's VXLAN only from that MAC), injected on
 * that MUX's fabric interface
 */
export function generateForged(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const config = loadConfig(need(f, 'config'));
  const host = config.hosts.find((h) => h.name === need(f, 'host'))!;
  const [a, b] = config.networks;
  const nicOn = (net: string) => config.nics.find((n) => n.host === host.name && n.network === net)!;
  const vipOf = (net: string) =>
    config.vips.find((v) => v.rules.some((r) => config.pools.find((p) => p.name === r.pool)!.network === net))!.address.text;
  const frame = (vni: number, innerMac: Uint8Array, vip: string) =>
    pkt()
      .eth({ src: need(f, 'mux-mac'), dst: need(f, 'host-mac') })
      .ipv4({ src: need(f, 'mux-pa'), dst: host.address.text })
      .udp({ sport: FORGED_OUTER_SPORT, dport: config.fabric.vxlanPort, checksum: 'zero' })
      .vxlan({ vni })
      .eth({ src: need(f, 'mux-mac'), dst: formatMac(innerMac) })
      .ipv4({ src: need(f, 'client'), dst: vip })
      .tcp({ sport: FORGED_INNER_SPORT, dport: 80, flags: TCP_SYN })
      .build();
  const frames: Buffer[] = [];
  for (let i = 0; i < FORGED_COPIES; i++) {
    frames.push(frame(a!.vni, nicOn(a!.name).mac, vipOf(b!.name))); // A's VNI and A's port, B's VIP
    frames.push(frame(b!.vni, nicOn(a!.name).mac, vipOf(b!.name))); // B's VNI toward A's port MAC
  }
  writeFileSync(
    join(need(f, 'out'), 'forged.pcap'),
    buildPcap(
      LINKTYPE_ETHERNET,
      frames.map((d, i) => ({ tsUs: 1e15 + i, data: d, origLen: d.length })),
    ),
  );
  writeFileSync(
    join(need(f, 'out'), 'forged-expected.json'),
    `${JSON.stringify(
      {
        drop_in_not_vip_of_vni: FORGED_COPIES,
        drop_in_unknown_mac: FORGED_COPIES,
      },
      null,
      2,
    )}\n`,
  );
}

/**
 * --run RUNDIR --a-json F --b-json F --requests N --host-before F --host-after F --expected F
 */
export function verifyTenants(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const requests = Number(need(f, 'requests'));
  const [netA, netB] = config.networks;
  const tenantOfNic = new Map(config.nics.map((n) => [n.name, n.network]));
  const tenantOfMac = new Map(config.nics.map((n) => [Buffer.from(n.mac).toString('hex'), n.network]));
  const vniOf = new Map(config.networks.map((n) => [n.name, n.vni]));
  const vipOfNet = new Map<string, string>();
  for (const v of config.vips) for (const r of v.rules) vipOfNet.set(config.pools.find((p) => p.name === r.pool)!.network, v.address.text);
  const sourceOf = new Map<string, string>();

  for (const [net, key] of [
    [netA!.name, 'a-json'],
    [netB!.name, 'b-json'],
  ] as const) {
    const recs = readClientRecords(need(f, key));
    const ok = recs.filter((r) => r.ok);
    const right = ok.filter((r) => r.backend !== null && tenantOfNic.get(r.backend) === net);
    c.check(
      recs.length === requests && ok.length === requests,
      `${net}: all ${requests} requests to ${vipOfNet.get(net)} succeeded`,
      `${ok.length} ok`,
    );
    c.check(
      right.length === ok.length,
      `${net}: every answer came from a backend of ${net}`,
      fmtCounts(countBy(ok, (r) => r.backend ?? '?')),
    );
    const raw = JSON.parse(readFileSync(need(f, key), 'utf8'));
    const src = raw.records?.[0]?.sourceAddress;
    if (typeof src === 'string') sourceOf.set(net, src.replace(/^::ffff:/, ''));
  }

  // the fabric: every VXLAN packet for a tenant's VIP carries that tenant's VNI and a port MAC of that tenant
  let vx = 0;
  let wrong = 0;
  for (const m of config.muxes) {
    for (const p of loadCapture(join(run, 'pcaps', `${m.name}.pcap`))) {
      const v = p.d.first('vxlan');
      if (v === undefined) continue;
      // the forged frames are injected on mux1's own port (scenario 15): not the MUX's traffic
      if (p.d.first('udp')?.srcPort === FORGED_OUTER_SPORT && p.d.all('tcp')[0]?.srcPort === FORGED_INNER_SPORT) continue;
      vx++;
      const inner = p.d.all('ipv4')[1];
      const innerEth = p.d.all('eth')[1];
      if (inner === undefined || innerEth === undefined) {
        wrong++;
        continue;
      }
      const net = [...vipOfNet.entries()].find(([, vip]) => vip === inner.dst)?.[0];
      if (net === undefined || v.vni !== vniOf.get(net) || tenantOfMac.get(innerEth.dst.replaceAll(':', '')) !== net) wrong++;
    }
  }
  c.check(
    vx > 0 && wrong === 0,
    "on the fabric, each tenant's VIP travels in its own VNI to its own tenant's ports",
    `${vx} VXLAN packets, ${wrong} crossed`,
  );

  // the backends: each saw only its own tenant's client (A's requests came from one source address, B's from another)
  for (const n of config.nics) {
    const expectSrc = sourceOf.get(n.network);
    const other = [...sourceOf.entries()].find(([net]) => net !== n.network)?.[1];
    let mine = 0;
    let theirs = 0;
    for (const p of loadCapture(join(run, 'pcaps', `${n.name}.pcap`))) {
      const ip = p.d.first('ipv4');
      if (ip === undefined || p.d.first('tcp') === undefined) continue;
      if (ip.src === expectSrc) mine++;
      else if (ip.src === other) theirs++;
    }
    c.check(
      mine > 0 && theirs === 0,
      `${n.name} (${n.addresses[0]!.text}, ${n.network}) saw only its tenant's client`,
      `${mine} packets from ${expectSrc}, ${theirs} from the other tenant's client`,
    );
  }

  // the forged frames
  const exp = JSON.parse(readFileSync(need(f, 'expected'), 'utf8')) as Record<string, number>;
  const before = JSON.parse(readFileSync(need(f, 'host-before'), 'utf8')) as Record<string, number>;
  const after = JSON.parse(readFileSync(need(f, 'host-after'), 'utf8')) as Record<string, number>;
  for (const [k, n] of Object.entries(exp)) {
    const d = (after[k] ?? 0) - (before[k] ?? 0);
    c.check(d === n, `forged VXLAN counted as ${k}`, `expected +${n}, got +${d}`);
  }
  return c;
}
