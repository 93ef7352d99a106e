// Scenario 26 (east-west-isolation-and-failures, docs/east-west.md): another tenant's VM with the client's
// addresses cannot reach the internal VIP; forged redirects are refused and change nothing; the MUX that
// placed most of 240 keep-alive connections is killed and their backend drained, and every connection is
// answered after each; the host's Fastpath entries expire. Verified from the captures (slbx's decoder;
// redirects' HMACs recomputed here with node:crypto from the lab's token, as docs/east-west.md specifies,
// not with runtime/redirect-mac.ts), the client's records, host1's counters and GET /flows.
//   verify.js east-west-failures --run RUNDIR --client NIC --other NIC --other-vni N --connections N --min-victims N --udp-flows N
//     --forged N --live-port P --iso-end-us T --kill-us T --drain-us T --victim MUX --drained NIC --udp-fast N
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REDIRECT_LEN, REDIRECT_PORT, REDIRECT_SIGNED_LEN, newRedirect, parseRedirect } from '../../../shared/redirect.js';
import { readClientJson } from '../../lab/client.js';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, type CapturedPacket } from './check.js';

type Inner = { src: string; dst: string; proto: 6 | 17; sport: number; dport: number; payloadLen: number; vni: number | null };

/** The innermost IP and TCP/UDP of a frame (inside VXLAN when there is one), with the VNI. */
function innerOf(p: CapturedPacket): Inner | null {
  const layers = p.d.layers;
  const vx = layers.findIndex((l) => l.layer === 'vxlan');
  const vxl = vx < 0 ? undefined : layers[vx];
  const vni = vxl !== undefined && vxl.layer === 'vxlan' ? vxl.vni : null;
  let ip: { src: string; dst: string } | null = null;
  for (let i = vx < 0 ? 0 : vx; i < layers.length; i++) {
    const l = layers[i]!;
    if ((l.layer === 'ipv4' || l.layer === 'ipv6') && !l.quoted && ip === null) ip = { src: l.src, dst: l.dst };
    if (ip !== null && (l.layer === 'tcp' || l.layer === 'udp'))
      return { ...ip, proto: l.layer === 'tcp' ? 6 : 17, sport: l.srcPort, dport: l.dstPort, payloadLen: l.payloadLen, vni };
  }
  return null;
}

function outerIp(p: CapturedPacket): { src: string; dst: string } | null {
  const l = p.d.layers.find((x) => x.layer === 'ipv4' || x.layer === 'ipv6');
  return l === undefined || (l.layer !== 'ipv4' && l.layer !== 'ipv6') ? null : { src: l.src, dst: l.dst };
}

type HostFlow = { kind: string; vni: number; protocol: string; client: string; vip: string; mux?: string; backend?: string; host?: string };
const flowText = (f: HostFlow) => `${f.kind} ${f.vni} ${f.protocol} ${f.client} ${f.vip} ${f.mux ?? ''} ${f.backend ?? ''} ${f.host ?? ''}`;

export function verifyEastWestFailures(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const json = <T>(name: string) => JSON.parse(readFileSync(join(run, name), 'utf8')) as T;
  const num = (k: string) => Number(need(f, k));
  const clientNic = config.nics.find((n) => n.name === need(f, 'client'))!;
  const otherNic = config.nics.find((n) => n.name === need(f, 'other'))!;
  const client = clientNic.address4!.text;
  const vipCfg = config.vips.find((v) => v.scope === 'internal' && v.address.family === 4)!;
  const vip = vipCfg.address.text;
  const otherVni = num('other-vni');
  const clientVni = config.networks.find((n) => n.name === clientNic.network)!.vni;
  const connections = num('connections');
  const minVictims = num('min-victims');
  const forged = num('forged');
  const isoEnd = num('iso-end-us');
  const killUs = num('kill-us');
  const drainUs = num('drain-us');
  const victim = config.muxes.find((m) => m.name === need(f, 'victim'))!;
  const drained = need(f, 'drained');
  const muxPa = new Set(config.muxes.map((m) => m.address.text));
  const clientPa = config.hosts.find((h) => h.name === clientNic.host)!.address.text;
  const pool = config.pools.find((p) => p.name === vipCfg.rules[0]!.pool)!;
  const backends = pool.backends.map((b) => config.nics.find((n) => n.name === b.nic)!);
  const counters = (name: string) => json<Record<string, number>>(name);
  const delta = (a: Record<string, number>, b: Record<string, number>, n: string) => (b[n] ?? 0) - (a[n] ?? 0);
  if (otherNic.address4?.text !== client)
    c.note(`${otherNic.name} does not share the client's address (${otherNic.address4?.text} vs ${client})`);

  // ---- 1. isolation: another tenant's VM, the client's own address, another VNI
  const otherCap = loadCapture(join(run, 'pcaps', `${otherNic.name}.pcap`));
  let toVip = 0;
  let fromVip = 0;
  for (const p of otherCap) {
    const x = innerOf(p);
    if (x === null) continue;
    if (x.src === client && x.dst === vip) toVip++;
    if (x.src === vip) fromVip++;
  }
  const isoA = counters('iso-before.json');
  const isoB = counters('iso-after.json');
  const dropped = delta(isoA, isoB, 'drop_out_ew_other_network');
  c.check(
    toVip > 0 && dropped === toVip && fromVip === 0,
    `every packet ${otherNic.name} (network ${otherNic.network}, VNI ${otherVni}, address ${client}) sent to the internal VIP ${vip} was dropped on ${otherNic.host} and counted as drop_out_ew_other_network, and none was answered`,
    `${toVip} sent (its capture), drop_out_ew_other_network +${dropped}, ${fromVip} answers`,
  );
  let otherVniFrames = 0;
  let fabricFrames = 0;
  for (const n of [...config.muxes.map((m) => m.name), ...config.hosts.map((h) => h.name)]) {
    for (const p of loadCapture(join(run, 'pcaps', `${n}.pcap`))) {
      const x = innerOf(p);
      if (x === null || x.vni === null) continue;
      fabricFrames++;
      if (x.vni === otherVni) otherVniFrames++;
    }
  }
  c.check(
    fabricFrames > 0 && otherVniFrames === 0,
    `no VXLAN frame of VNI ${otherVni} on any MUX's or host's fabric port`,
    `${otherVniFrames} of ${fabricFrames} VXLAN frames`,
  );
  let atBackendsBefore = 0;
  const backendCaps = new Map(backends.map((b) => [b.name, loadCapture(join(run, 'pcaps', `${b.name}.pcap`))]));
  for (const cap of backendCaps.values())
    for (const p of cap) {
      const x = innerOf(p);
      if (x !== null && p.tsUs < isoEnd && (x.src === client || x.dst === client)) atBackendsBefore++;
    }
  c.check(
    atBackendsBefore === 0,
    `zero packets from or to ${client} at the backends while only ${otherNic.name} sent`,
    `${atBackendsBefore} packets`,
  );

  // ---- the client's records: the UDP flows and the keep-alive connections, every exchange answered
  const udp = readClientJson(join(run, 'udp.json'), 'udp').records;
  const udpFlows = num('udp-flows');
  c.check(
    udp.length === udpFlows && udp.every((r) => r.ok),
    `${udpFlows} UDP flows from ${clientNic.name}, every datagram echoed`,
    `${udp.filter((r) => r.ok).length} of ${udp.length}`,
  );
  const hold = readClientJson(join(run, 'hold.json'), 'hold').records;
  const failed = hold.filter((r) => !r.ok || r.answered !== r.requests || r.backends.length !== 1);
  c.check(
    hold.length === connections && failed.length === 0,
    `${connections} keep-alive connections: every request answered, each connection by one backend, none reset`,
    `${hold.length - failed.length} of ${hold.length}; answers per connection ${Math.min(...hold.map((r) => r.answered))}..${Math.max(...hold.map((r) => r.answered))}; errors ${
      fmtCounts(countBy(failed, (r) => r.error ?? 'unanswered')) || 'none'
    }`,
  );

  // ---- 2. the forged redirects: at host1 from the MUX's PA, HMAC checked here; refused, counted, nothing changed
  const token = readFileSync(join(run, 'api-token'), 'utf8').trim();
  const key = createHmac('sha256', token).update('slbx-redirect').digest();
  const livePort = num('live-port');
  const host1Cap = loadCapture(join(run, 'pcaps', `${clientNic.host}.pcap`));
  const r = newRedirect();
  let badMacLive = 0;
  let goodMacNeverSent = 0;
  const redirectedBy = new Map<number, Set<string>>(); // client TCP port -> the MUX PAs its good redirects came from
  const sentPorts = new Set<number>(); // client source ports host1 ever sent to a MUX or fast path
  for (const p of host1Cap) {
    const o = outerIp(p);
    const u = p.d.first('udp');
    if (o === null || u === undefined) continue;
    if (u.dstPort === REDIRECT_PORT && o.dst === clientPa) {
      const body = p.data.subarray(u.payloadOff, u.payloadOff + u.payloadLen);
      if (body.length !== REDIRECT_LEN || parseRedirect(body, 0, r) < 0) continue;
      const good = createHmac('sha256', key)
        .update(body.subarray(0, REDIRECT_SIGNED_LEN))
        .digest()
        .equals(Buffer.from(body.subarray(REDIRECT_SIGNED_LEN, REDIRECT_LEN)));
      if (!good && r.srcPort >= livePort && r.srcPort < livePort + forged) badMacLive++;
      if (good && r.srcPort < 1 + forged && r.srcPort >= 1) goodMacNeverSent++;
      if (good && r.protocol === 6 && r.srcPort >= 1024) {
        const s = redirectedBy.get(r.srcPort) ?? new Set<string>();
        s.add(o.src);
        redirectedBy.set(r.srcPort, s);
      }
      continue;
    }
    const x = innerOf(p);
    if (x !== null && x.vni !== null && o.src === clientPa && x.src === client) sentPorts.add(x.sport);
  }
  const neverSent = [...Array(forged).keys()].map((i) => i + 1).every((port) => !sentPorts.has(port));
  c.check(
    badMacLive === forged && goodMacNeverSent === forged && neverSent,
    `the forged redirects reached ${clientNic.host} from ${[...muxPa][0]}: ${forged} with a bad HMAC (client ports ${livePort}.., the first a live flow), ${forged} correctly signed for client ports 1..${forged} that ${clientNic.host} never sent`,
    `${badMacLive} bad HMAC, ${goodMacNeverSent} good HMAC for unsent flows; ports 1..${forged} ${neverSent ? 'never' : 'SOMETIMES'} sent by ${clientNic.host}`,
  );
  const fA = counters('forge-before.json');
  const fB = counters('forge-after.json');
  c.check(
    delta(fA, fB, 'drop_redirect_bad_signature') === forged &&
      delta(fA, fB, 'drop_redirect_unbound') === forged &&
      delta(fA, fB, 'redirects_accepted') === 0,
    `${clientNic.host} refused them: drop_redirect_bad_signature +${forged}, drop_redirect_unbound +${forged}, no redirect accepted`,
    `bad_signature +${delta(fA, fB, 'drop_redirect_bad_signature')}, unbound +${delta(fA, fB, 'drop_redirect_unbound')}, accepted +${delta(fA, fB, 'redirects_accepted')}, repeated +${delta(fA, fB, 'redirects_repeated')}`,
  );
  const before = json<HostFlow[]>('flows-before-forge.json').map(flowText).sort();
  const after = json<HostFlow[]>('flows-after-forge.json').map(flowText).sort();
  const same = before.length === after.length && before.every((t, i) => t === after[i]);
  const liveBefore = json<HostFlow[]>('flows-before-forge.json').find((x) => x.client === `${client}:${livePort}`);
  c.check(
    same && before.length >= connections,
    `the forged redirects changed nothing: ${clientNic.host}'s GET /flows is the same before and after (kind, VNI, 5-tuple, MUX or backend)`,
    `${before.length} entries before, ${after.length} after, ${same ? 'identical' : 'DIFFERENT'}; the live flow :${livePort} stays ${liveBefore?.kind} to ${liveBefore?.backend}`,
  );

  // ---- 3. the killed MUX: the connections it redirected, each answered after the kill
  const listed = json<{ src: string; dst: string; protocol: string; nic: string }[]>(`flows-${victim.name}.json`).filter(
    (x) => x.protocol === 'tcp' && x.dst === `${vip}:7000`,
  );
  const byPort = new Map(hold.filter((h) => h.sourcePort !== null).map((h) => [h.sourcePort!, h]));
  const victims = [...byPort.keys()].filter((port) => {
    const s = redirectedBy.get(port);
    return s !== undefined && s.size === 1 && s.has(victim.address.text);
  });
  const listedPorts = new Set(listed.map((x) => Number(x.src.split(':')[1])));
  c.check(
    victims.length >= minVictims && victims.every((port) => listedPorts.has(port)),
    `${victim.name} (killed with SIGKILL) redirected at least ${minVictims} of the connections (the redirects at ${clientNic.host}, from its PA ${victim.address.text} only), each listed in its GET /flows`,
    `${victims.length} redirected by it, ${listed.length} in its GET /flows`,
  );
  // each connection's answers after a moment, from its backend's capture (payload from the DIP to the client)
  const answersAfter = (nic: string, port: number, t: number): number => {
    const dip = config.nics.find((n) => n.name === nic)!.address4!.text;
    let n = 0;
    for (const p of backendCaps.get(nic) ?? []) {
      if (p.tsUs <= t) continue;
      const x = innerOf(p);
      if (x !== null && x.proto === 6 && x.src === dip && x.dst === client && x.dport === port && x.payloadLen > 0) n++;
    }
    return n;
  };
  const afterKill = victims.map((port) => answersAfter(byPort.get(port)!.backends[0] ?? '', port, killUs));
  c.check(
    afterKill.length > 0 && afterKill.every((n) => n > 0) && victims.every((port) => byPort.get(port)!.ok),
    `every connection ${victim.name} had redirected was answered after it was killed (its backend's capture), and completed without error (the client's records)`,
    `${afterKill.filter((n) => n > 0).length} of ${victims.length}; answers after the kill per connection ${Math.min(...afterKill)}..${Math.max(...afterKill)}`,
  );

  // ---- 4. the drained backend keeps its connections
  const onDrained = hold.filter((h) => h.backends[0] === drained && h.sourcePort !== null);
  const afterDrain = onDrained.map((h) => answersAfter(drained, h.sourcePort!, drainUs));
  c.check(
    onDrained.length > 0 && afterDrain.every((n) => n > 0) && onDrained.every((h) => h.ok && h.backends.length === 1),
    `every connection on ${drained} was answered by it after it was drained, and completed there`,
    `${afterDrain.filter((n) => n > 0).length} of ${onDrained.length} (of them ${onDrained.filter((h) => victims.includes(h.sourcePort!)).length} redirected by ${victim.name}); answers after the drain per connection ${Math.min(...afterDrain)}..${Math.max(...afterDrain)}`,
  );

  // ---- 5. idle expiry: the UDP entries gone while TCP lives; every entry gone after the traffic
  const udpFast = num('udp-fast');
  const gone = json<HostFlow[]>('flows-udp-gone.json');
  const udpLeft = gone.filter((x) => x.protocol === 'udp').length;
  const tcpLive = gone.filter((x) => x.protocol === 'tcp' && x.kind === 'fastpath' && x.vni === clientVni).length;
  c.check(
    udpFast >= udpFlows && udpLeft === 0 && tcpLive >= connections,
    `the UDP flows' Fastpath entries expired with the UDP idle timeout (${config.flowTable.udpIdleTimeoutS} s) while the TCP connections' stayed`,
    `UDP fastpath entries ${udpFast} right after the UDP flows, ${udpLeft} later with ${tcpLive} TCP fastpath entries live`,
  );
  const end = json<{ flows: Record<string, number> }>('ew-end.json');
  const left = Object.values(end.flows).reduce((a, b) => a + b, 0);
  c.check(left === 0, `after the traffic ${clientNic.host}'s /status eastWest counts no entry`, JSON.stringify(end.flows));
  const h1 = counters('host1-after.json');
  c.note(
    `${clientNic.host}: redirects_accepted ${h1.redirects_accepted ?? 0}, ew_fastpath_out ${h1.ew_fastpath_out ?? 0}, ew_fastpath_local ${h1.ew_fastpath_local ?? 0}, ew_to_mux ${h1.ew_to_mux ?? 0}, drop_out_ew_peer_unresolved ${h1.drop_out_ew_peer_unresolved ?? 0}`,
  );
  return c;
}
