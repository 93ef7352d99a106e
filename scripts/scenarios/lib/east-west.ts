// Scenario 25 (east-west-fastpath, IPv4) and 27 (the same over IPv6): a client VM on host1 reaches an
// internal VIP whose backends sit on host1 and host2; only each flow's first packets may cross a MUX, the
// rest must go host PA to host PA (or stay on host1). Verified from the captures (every MUX's and host's
// fab0, the client VM's and every backend's eth0) with slbx's own decoder and tshark, the client's
// records, the redirects themselves (their HMAC checked here with node:crypto from the lab's token, as
// docs/east-west.md specifies it, not with runtime/redirect-mac.ts) and the daemons' counters.
//   verify.js east-west-fastpath --run RUNDIR --family 4|6 --client NIC --connections N --min-exchanges N
//     --udp-flows N --datagrams N --hold F --udp F --host1-before F --host1-after F
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ip as parseIp } from '../../../shared/addr.js';
import { formatMac } from '../../../shared/addr.js';
import { REDIRECT_LEN, REDIRECT_PORT, REDIRECT_SIGNED_LEN, newRedirect, parseRedirect } from '../../../shared/redirect.js';
import type { SlbxConfig } from '../../../shared/config.js';
import { readClientJson } from '../../lab/client.js';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields, type CapturedPacket } from './check.js';
import { expectedBackend } from './bgp.js';

/** The issue's bound: client packets of one TCP flow that may reach the MUXes (handshake, and what was sent before the redirect). */
export const MAX_MUX_PACKETS_PER_TCP_FLOW = 4;

type Ip = { src: string; dst: string; id: number | null };
type L4 = { proto: 6 | 17; sport: number; dport: number; seq: number; ack: number; flags: number; payload: Buffer };

/** The IP and TCP/UDP layers of a frame, the innermost ones (inside VXLAN when there is one). */
function innerOf(p: CapturedPacket): { ip: Ip; l4: L4; vxlan: boolean } | null {
  const layers = p.d.layers;
  const vx = layers.findIndex((l) => l.layer === 'vxlan');
  const from = vx < 0 ? 0 : vx;
  let ip: Ip | null = null;
  for (let i = from; i < layers.length; i++) {
    const l = layers[i]!;
    if ((l.layer === 'ipv4' || l.layer === 'ipv6') && !l.quoted && ip === null)
      ip = { src: l.src, dst: l.dst, id: l.layer === 'ipv4' ? l.id : null };
    if (ip !== null && l.layer === 'tcp') {
      const payload = Buffer.from(p.data.subarray(l.payloadOff, l.payloadOff + l.payloadLen));
      return { ip, l4: { proto: 6, sport: l.srcPort, dport: l.dstPort, seq: l.seq, ack: l.ack, flags: l.flags, payload }, vxlan: vx >= 0 };
    }
    if (ip !== null && l.layer === 'udp') {
      const payload = Buffer.from(p.data.subarray(l.payloadOff, l.payloadOff + l.payloadLen));
      return { ip, l4: { proto: 17, sport: l.srcPort, dport: l.dstPort, seq: 0, ack: 0, flags: 0, payload }, vxlan: vx >= 0 };
    }
  }
  return null;
}

function outerIp(p: CapturedPacket): { src: string; dst: string } | null {
  const l = p.d.layers.find((x) => x.layer === 'ipv4' || x.layer === 'ipv6');
  return l === undefined || (l.layer !== 'ipv4' && l.layer !== 'ipv6') ? null : { src: l.src, dst: l.dst };
}

/** One client packet's identity, the same in every capture it crosses (NAT changes neither). */
function identity(ip: Ip, l4: L4): string {
  return l4.proto === 6 ? `${ip.id ?? ''}/${l4.seq}/${l4.ack}/${l4.flags}/${l4.payload.length}` : `${l4.payload.toString('hex')}`;
}

const flowKey = (proto: number, clientPort: number) => `${proto === 6 ? 'tcp' : 'udp'}:${clientPort}`;

/** A TCP byte stream from its segments: each sequence number's first payload, in order (retransmissions once). */
function stream(segs: { seq: number; payload: Buffer }[]): Buffer {
  const bySeq = new Map<number, Buffer>();
  for (const s of segs) if (s.payload.length > 0 && !bySeq.has(s.seq)) bySeq.set(s.seq, s.payload);
  const seqs = [...bySeq.keys()];
  if (seqs.length === 0) return Buffer.alloc(0);
  const base = seqs[0]!;
  const rel = (x: number) => (x - base) >>> 0;
  return Buffer.concat(seqs.sort((a, b) => rel(a) - rel(b)).map((s) => bySeq.get(s)!));
}

function hist(values: Iterable<number>): string {
  return fmtCounts(countBy(values, (v) => String(v).padStart(2, ' ')));
}

function internalVip(config: SlbxConfig, family: 4 | 6): string {
  const v = config.vips.find((x) => x.scope === 'internal' && x.address.family === family);
  if (v === undefined) throw new Error(`no internal VIP of IPv${family} in the config`);
  return v.address.text;
}

export function verifyEastWestFastpath(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const family = Number(need(f, 'family')) as 4 | 6;
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const clientNic = config.nics.find((n) => n.name === need(f, 'client'))!;
  const client = (family === 4 ? clientNic.address4 : clientNic.address6)!.text;
  const vip = internalVip(config, family);
  const vipRules = config.vips.find((v) => v.address.text === vip)!.rules;
  const tcpPort = vipRules.find((r) => (r.protocols as readonly number[]).includes(6))!.frontendPort;
  const udpPort = vipRules.find((r) => (r.protocols as readonly number[]).includes(17))!.frontendPort;
  const connections = Number(need(f, 'connections'));
  const minExchanges = Number(need(f, 'min-exchanges'));
  const udpFlows = Number(need(f, 'udp-flows'));
  const datagrams = Number(need(f, 'datagrams'));
  const muxPa = new Set(config.muxes.map((m) => m.address.text));
  const hostPa = new Map(config.hosts.map((h) => [h.name, h.address.text]));
  const clientHost = clientNic.host;
  const clientPa = hostPa.get(clientHost)!;
  const pool = config.pools.find((p) => p.name === vipRules[0]!.pool)!;
  const backends = pool.backends.map((b) => config.nics.find((n) => n.name === b.nic)!);
  const dipAddr = new Map(backends.map((n) => [n.name, (family === 4 ? n.address4 : n.address6)!.text]));
  const dips = new Set(dipAddr.values());
  const oracleTcp = expectedBackend(config, vip, 6, tcpPort);
  const oracleUdp = expectedBackend(config, vip, 17, udpPort);

  // ---- the client's records: every connection and flow answered, each by the oracle's backend
  const hold = readClientJson(need(f, 'hold'), 'hold').records;
  const udp = readClientJson(need(f, 'udp'), 'udp').records;
  const backendOf = new Map<string, string>(); // flow key -> the backend that answered it
  const okHold = hold.filter((r) => r.ok && r.answered >= minExchanges && r.backends.length === 1);
  c.check(
    hold.length === connections && okHold.length === connections,
    `${connections} TCP connections to ${vip}:${tcpPort}, each with at least ${minExchanges} request/response exchanges, all answered by one backend`,
    `${okHold.length} of ${hold.length}; exchanges per connection ${Math.min(...hold.map((r) => r.answered))}..${Math.max(...hold.map((r) => r.answered))}; errors ${
      fmtCounts(
        countBy(
          hold.filter((r) => !r.ok),
          (r) => r.error ?? '?',
        ),
      ) || 'none'
    }`,
  );
  const okUdp = udp.filter((r) => r.ok);
  c.check(
    udp.length === udpFlows && okUdp.length === udpFlows,
    `${udpFlows} UDP flows to ${vip}:${udpPort}, ${datagrams} datagrams each, every echo byte for byte from one backend (the client's records)`,
    `${okUdp.length} of ${udp.length}; errors ${
      fmtCounts(
        countBy(
          udp.filter((r) => !r.ok),
          (r) => r.error ?? '?',
        ),
      ) || 'none'
    }`,
  );
  let oracleMiss = 0;
  for (const r of hold) {
    if (r.sourcePort === null) continue;
    const b = r.backends[0] ?? null;
    if (b !== null) backendOf.set(flowKey(6, r.sourcePort), b);
    if (b !== oracleTcp(r.sourceAddress?.replace(/^::ffff:/, '') ?? null, r.sourcePort)) oracleMiss++;
  }
  for (const r of udp) {
    if (r.sourcePort === null) continue;
    if (r.backend !== null) backendOf.set(flowKey(17, r.sourcePort), r.backend);
    if (r.backend !== oracleUdp(r.sourceAddress?.replace(/^::ffff:/, '') ?? null, r.sourcePort)) oracleMiss++;
  }
  // two flows of one 5-tuple are one flow to the MUX and the host agent: the client must not reuse a port
  const ports = [...hold.map((r) => `tcp ${r.sourcePort}`), ...udp.map((r) => `udp ${r.sourcePort}`)];
  c.check(
    new Set(ports).size === ports.length,
    'every connection and UDP flow had a 5-tuple of its own (the flows below are told apart by it)',
    `${new Set(ports).size} distinct of ${ports.length}`,
  );
  const share = countBy(backendOf.values(), (b) => b);
  c.check(
    oracleMiss === 0 && backends.every((b) => (share.get(b.name) ?? 0) > 0),
    'each flow answered by the backend Maglev picks for it (the independent oracle, scripts/oracle): each backend gets its Maglev share',
    `${oracleMiss} of ${hold.length + udp.length} elsewhere; flows per backend ${fmtCounts(share)}`,
  );
  const flows = [...backendOf.keys()];
  const localBackends = new Set(backends.filter((b) => b.host === clientHost).map((b) => b.name));

  // ---- the client VM's own capture: it only ever talks to the VIP
  const clientCap = loadCapture(join(run, 'pcaps', `${clientNic.name}.pcap`));
  const out = new Map<string, { ts: number; ip: Ip; l4: L4 }[]>(); // client -> VIP, per flow, in capture order
  const back = new Map<string, { seq: number; payload: Buffer }[]>(); // VIP -> client
  let peersOther = 0;
  let dipSeen = 0;
  let clientIp = 0;
  for (const p of clientCap) {
    const x = innerOf(p);
    if (x === null) continue;
    clientIp++;
    const peer = x.ip.src === client ? x.ip.dst : x.ip.src;
    if (dips.has(x.ip.src) || dips.has(x.ip.dst)) dipSeen++;
    if (peer !== vip) {
      peersOther++;
      continue;
    }
    if (x.ip.src === client) {
      const k = flowKey(x.l4.proto, x.l4.sport);
      if (!out.has(k)) out.set(k, []);
      out.get(k)!.push({ ts: p.tsUs, ip: x.ip, l4: x.l4 });
    } else {
      const k = flowKey(x.l4.proto, x.l4.dport);
      if (!back.has(k)) back.set(k, []);
      back.get(k)!.push({ seq: x.l4.seq, payload: x.l4.payload });
    }
  }
  c.check(
    clientIp > 0 && peersOther === 0 && dipSeen === 0,
    `the client VM's capture shows only the VIP ${vip}, never a DIP`,
    `${clientIp} TCP/UDP packets, ${peersOther} with another peer, ${dipSeen} with a DIP (${[...dips].join(', ')})`,
  );

  // ---- the MUXes: which client packets reached them (VXLAN from the client's host), and nothing else
  const atMux = new Map<string, Map<string, number>>(); // flow -> identity -> copies
  const muxCount = new Map<string, number>();
  let notClient = 0;
  let fromOtherHost = 0;
  let muxVxlanFromHosts = 0;
  for (const m of config.muxes) {
    for (const p of loadCapture(join(run, 'pcaps', `${m.name}.pcap`))) {
      if (p.d.first('vxlan') === undefined) continue;
      const o = outerIp(p);
      const x = innerOf(p);
      if (o === null || x === null) continue;
      if (x.ip.src !== client || x.ip.dst !== vip) notClient++;
      if (o.dst !== m.address.text) continue; // the MUX's own VXLAN to a DIP's host
      muxVxlanFromHosts++;
      if (o.src !== clientPa) fromOtherHost++;
      const k = flowKey(x.l4.proto, x.l4.sport);
      const ids = atMux.get(k) ?? new Map<string, number>();
      const id = identity(x.ip, x.l4);
      ids.set(id, (ids.get(id) ?? 0) + 1);
      atMux.set(k, ids);
      muxCount.set(k, (muxCount.get(k) ?? 0) + 1);
    }
  }
  c.check(
    notClient === 0 && fromOtherHost === 0,
    'no reply ever crosses a MUX: every VXLAN frame at a MUX carries the client VM to the VIP, and comes from its host',
    `${muxVxlanFromHosts} frames from hosts; ${notClient} carried something else, ${fromOtherHost} came from another host`,
  );
  const tcpFlows = flows.filter((k) => k.startsWith('tcp'));
  const udpFlowKeys = flows.filter((k) => k.startsWith('udp'));
  const tcpAtMux = tcpFlows.map((k) => muxCount.get(k) ?? 0);
  const udpAtMux = udpFlowKeys.map((k) => muxCount.get(k) ?? 0);
  c.note(`client packets per TCP flow at the MUXes (count: flows): ${hist(tcpAtMux)}`);
  c.note(`client datagrams per UDP flow at the MUXes (count: flows): ${hist(udpAtMux)}`);
  c.check(
    tcpAtMux.every((n) => n >= 2 && n <= MAX_MUX_PACKETS_PER_TCP_FLOW),
    `every TCP flow's handshake crossed a MUX, and at most ${MAX_MUX_PACKETS_PER_TCP_FLOW} client packets per flow did`,
    `min ${Math.min(...tcpAtMux)}, max ${Math.max(...tcpAtMux)} over ${tcpFlows.length} flows`,
  );
  c.check(
    udpAtMux.every((n) => n >= 2 && n < datagrams),
    `every UDP flow's first two datagrams crossed a MUX (the redirect follows the second), not all ${datagrams}`,
    `min ${Math.min(...udpAtMux)}, max ${Math.max(...udpAtMux)} over ${udpFlowKeys.length} flows`,
  );

  // ---- the redirects at the client's host: signed with the policy key, naming the oracle's DIP
  const token = readFileSync(join(run, 'api-token'), 'utf8').trim();
  const key = createHmac('sha256', token).update('slbx-redirect').digest();
  const r = newRedirect();
  const firstRedirectUs = new Map<string, number>();
  const redirectsPerFlow = new Map<string, number>();
  let redirects = 0;
  let badMac = 0;
  let badTarget = 0;
  const host1Cap = loadCapture(join(run, 'pcaps', `${clientHost}.pcap`));
  const fastOnFabric = new Map<string, Map<string, number>>(); // flow -> identity -> copies, host1 PA -> another host's PA
  const toMuxAfterRedirect = new Map<string, number>();
  const toMuxTimes = new Map<string, number[]>();
  let toMuxCount = 0;
  let returnsIn = 0;
  for (const p of host1Cap) {
    const o = outerIp(p);
    const u = p.d.first('udp');
    if (o === null || u === undefined) continue;
    if (u.dstPort === REDIRECT_PORT && o.dst === clientPa) {
      redirects++;
      const body = p.data.subarray(u.payloadOff, u.payloadOff + u.payloadLen);
      if (!muxPa.has(o.src) || parseRedirect(body, 0, r) < 0 || body.length !== REDIRECT_LEN) {
        badTarget++;
        continue;
      }
      const want = createHmac('sha256', key).update(body.subarray(0, REDIRECT_SIGNED_LEN)).digest();
      if (!want.equals(Buffer.from(body.subarray(REDIRECT_SIGNED_LEN, REDIRECT_LEN)))) badMac++;
      const k = flowKey(r.protocol, r.srcPort);
      const b = backendOf.get(k);
      const nic = config.nics.find((n) => n.name === b);
      const dip = family === 4 ? `${r.dip[0]}.${r.dip[1]}.${r.dip[2]}.${r.dip[3]}` : parseIpFrom16(r.dip);
      if (
        nic === undefined ||
        dip !== dipAddr.get(nic.name) ||
        `${r.dipHostPa[0]}.${r.dipHostPa[1]}.${r.dipHostPa[2]}.${r.dipHostPa[3]}` !== hostPa.get(nic.host) ||
        formatMac(r.dipMac) !== formatMac(nic.mac)
      )
        badTarget++;
      redirectsPerFlow.set(k, (redirectsPerFlow.get(k) ?? 0) + 1);
      if (!firstRedirectUs.has(k)) firstRedirectUs.set(k, p.tsUs);
      continue;
    }
    if (p.d.first('vxlan') === undefined) continue;
    const x = innerOf(p);
    if (x === null) continue;
    if (o.src === clientPa && x.ip.src === client && x.ip.dst === vip) {
      const k = flowKey(x.l4.proto, x.l4.sport);
      if (muxPa.has(o.dst)) {
        toMuxCount++;
        if (!toMuxTimes.has(k)) toMuxTimes.set(k, []);
        toMuxTimes.get(k)!.push(p.tsUs);
      } else {
        const ids = fastOnFabric.get(k) ?? new Map<string, number>();
        const id = identity(x.ip, x.l4);
        ids.set(id, (ids.get(id) ?? 0) + 1);
        fastOnFabric.set(k, ids);
      }
    }
    if (o.dst === clientPa && x.ip.src === vip && x.ip.dst === client && !muxPa.has(o.src)) returnsIn++;
  }
  c.check(
    redirects > 0 && badMac === 0 && badTarget === 0 && flows.every((k) => (redirectsPerFlow.get(k) ?? 0) > 0),
    `every flow got a redirect at ${clientHost}, each signed under the policy key (HMAC checked here) and naming the flow's backend, its host's PA and MAC`,
    `${redirects} redirects; ${badMac} with a bad HMAC, ${badTarget} naming something else; per flow ${hist(flows.map((k) => redirectsPerFlow.get(k) ?? 0))}`,
  );
  // measured, not judged: a packet the host agent sent to a MUX while the redirect waited in its capture
  // queue is captured after the redirect (the check above judges from the first fast-path packet on)
  for (const k of flows) {
    const t = firstRedirectUs.get(k);
    if (t !== undefined) toMuxAfterRedirect.set(k, (toMuxTimes.get(k) ?? []).filter((x) => x > t).length);
  }
  c.note(
    `client packets sent to a MUX after the redirect was captured at ${clientHost} (count: flows): ${hist(toMuxAfterRedirect.values())}`,
  );

  // the replies: straight from the backends' hosts to the client's host, never through a MUX
  let repliesToMux = 0;
  let repliesOut = 0;
  for (const h of config.hosts) {
    if (h.name === clientHost) continue;
    for (const p of loadCapture(join(run, 'pcaps', `${h.name}.pcap`))) {
      if (p.d.first('vxlan') === undefined) continue;
      const o = outerIp(p);
      const x = innerOf(p);
      if (o === null || x === null || o.src !== h.address.text) continue;
      if (muxPa.has(o.dst)) repliesToMux++;
      else if (o.dst === clientPa && x.ip.src === vip && x.ip.dst === client) repliesOut++;
    }
  }
  c.check(
    repliesToMux === 0 && repliesOut > 0 && returnsIn === repliesOut,
    `the replies of remote backends went from their host's PA to ${clientHost}'s PA (VIP -> client), none to a MUX`,
    `${repliesOut} sent, ${returnsIn} seen arriving at ${clientHost}, ${repliesToMux} to a MUX`,
  );

  // ---- what each backend received from and sent to the client
  type AtBackend = { inSegs: { seq: number; payload: Buffer }[]; outSegs: { seq: number; payload: Buffer }[]; inIds: Map<string, number> };
  const atBackend = new Map<string, AtBackend>();
  for (const b of backends) {
    const dip = dipAddr.get(b.name)!;
    for (const p of loadCapture(join(run, 'pcaps', `${b.name}.pcap`))) {
      const x = innerOf(p);
      if (x === null) continue;
      const inward = x.ip.src === client && x.ip.dst === dip;
      const outward = x.ip.src === dip && x.ip.dst === client;
      if (!inward && !outward) continue;
      const k = flowKey(x.l4.proto, inward ? x.l4.sport : x.l4.dport);
      const e = atBackend.get(k) ?? { inSegs: [], outSegs: [], inIds: new Map<string, number>() };
      (inward ? e.inSegs : e.outSegs).push({ seq: x.l4.seq, payload: x.l4.payload });
      if (inward) e.inIds.set(identity(x.ip, x.l4), (e.inIds.get(identity(x.ip, x.l4)) ?? 0) + 1);
      atBackend.set(k, e);
    }
  }

  // ---- each flow, packet by packet from the client VM's capture: each client packet is found at a MUX
  // (VXLAN from host1), or on the fast path (host1's PA to the backend host's PA; for a backend on host1,
  // at the backend without having crossed a MUX), or nowhere (lost before host1 sent it: TCP sent it
  // again). Once a packet of a flow took the fast path, none crossed a MUX.
  let wentBack = 0;
  let noFast = 0;
  let lost = 0;
  let remoteFast = 0;
  let localFast = 0;
  let localOnFabric = 0;
  let unexplained = 0;
  const firstFastUs = new Map<string, number>();
  for (const k of flows) {
    const local = localBackends.has(backendOf.get(k)!);
    const muxLeft = new Map(atMux.get(k) ?? []);
    const fastLeft = new Map<string, number>();
    if (!local) for (const [id, n] of fastOnFabric.get(k) ?? []) fastLeft.set(id, n);
    else {
      if ((fastOnFabric.get(k)?.size ?? 0) > 0) localOnFabric++;
      for (const [id, n] of atBackend.get(k)?.inIds ?? []) {
        const m = n - (atMux.get(k)?.get(id) ?? 0);
        if (m > 0) fastLeft.set(id, m);
      }
    }
    // every client packet at the backend came through a MUX or the fast path (nothing else delivers it)
    for (const [id, n] of atBackend.get(k)?.inIds ?? []) {
      if (n > (atMux.get(k)?.get(id) ?? 0) + (local ? n : (fastOnFabric.get(k)?.get(id) ?? 0))) unexplained++;
    }
    let fast = false;
    for (const pk of out.get(k) ?? []) {
      const id = identity(pk.ip, pk.l4);
      if ((muxLeft.get(id) ?? 0) > 0) {
        muxLeft.set(id, muxLeft.get(id)! - 1);
        if (fast) wentBack++;
      } else if ((fastLeft.get(id) ?? 0) > 0) {
        fastLeft.set(id, fastLeft.get(id)! - 1);
        if (!fast) firstFastUs.set(k, pk.ts);
        fast = true;
        if (local) localFast++;
        else remoteFast++;
      } else lost++;
    }
    if (!fast) noFast++;
  }
  c.check(
    noFast === 0 && wentBack === 0,
    'every flow went over to the fast path, and no packet of a flow crossed a MUX once one had taken it',
    `${flows.length - noFast} of ${flows.length} flows on the fast path; ${wentBack} packets back through a MUX; ${lost} client packets lost before ${clientHost} sent them (sent again by TCP)`,
  );
  c.check(
    remoteFast > 0 && unexplained === 0,
    `every later packet of a flow to a backend on another host went ${clientHost}'s PA to that host's PA: each client packet at a backend came through a MUX or that way`,
    `${remoteFast} fast-path packets PA to PA; ${unexplained} packets at a backend came another way`,
  );
  c.check(
    localFast > 0 && localOnFabric === 0,
    `every fast-path packet of a flow to a backend on ${clientHost} stayed on ${clientHost} (never on its fabric)`,
    `${localFast} packets; ${localOnFabric} such flows seen on the fabric`,
  );
  const lags = flows
    .map((k) => (firstFastUs.get(k) ?? NaN) - (firstRedirectUs.get(k) ?? NaN))
    .filter((x) => Number.isFinite(x))
    .sort((a, b) => a - b);
  if (lags.length > 0)
    c.note(
      `redirect captured at ${clientHost} -> the flow's first packet on the fast path at the client VM: p50 ${(lags[lags.length >> 1]! / 1000).toFixed(1)} ms, max ${(lags[lags.length - 1]! / 1000).toFixed(1)} ms (negative: sent before the redirect was captured)`,
    );

  // ---- payloads byte for byte: the client VM's streams and datagrams against each backend's
  let streamsOk = 0;
  let bytes = 0;
  for (const k of flows) {
    const e = atBackend.get(k);
    const sent = out.get(k) ?? [];
    const got = back.get(k) ?? [];
    if (e === undefined) continue;
    let ok: boolean;
    if (k.startsWith('tcp')) {
      const a = stream(sent.map((s) => ({ seq: s.l4.seq, payload: s.l4.payload })));
      const b = stream(e.inSegs);
      const c2 = stream(e.outSegs);
      const d = stream(got);
      ok = a.length > 0 && a.equals(b) && c2.length > 0 && c2.equals(d);
      bytes += a.length + c2.length;
    } else {
      const a = sent.map((s) => s.l4.payload.toString('hex')).sort();
      const b = e.inSegs.map((s) => s.payload.toString('hex')).sort();
      const c2 = e.outSegs.map((s) => s.payload.toString('hex')).sort();
      const d = got.map((s) => s.payload.toString('hex')).sort();
      ok = a.length === datagrams && a.join() === b.join() && c2.length === datagrams && c2.join() === d.join();
      bytes += sent.reduce((x, s) => x + s.l4.payload.length, 0) + got.reduce((x, s) => x + s.payload.length, 0);
    }
    if (ok) streamsOk++;
  }
  c.check(
    streamsOk === flows.length,
    "payloads byte for byte: each flow's request stream (TCP) or datagrams (UDP) at the client VM equal those at its backend, and the answers both ways",
    `${streamsOk} of ${flows.length} flows, ${bytes} payload bytes compared`,
  );

  // ---- counters of the client's host agent over the run
  const before = JSON.parse(readFileSync(need(f, 'host1-before'), 'utf8')) as Record<string, number>;
  const after = JSON.parse(readFileSync(need(f, 'host1-after'), 'utf8')) as Record<string, number>;
  const d = (n: string) => (after[n] ?? 0) - (before[n] ?? 0);
  const refused = Object.keys(after).filter((n) => n.startsWith('drop_redirect_') && d(n) !== 0);
  c.check(
    d('redirects_accepted') === flows.length && refused.length === 0 && d('ew_flow_table_full') === 0,
    `${clientHost} accepted one redirect per flow and refused none`,
    `accepted +${d('redirects_accepted')} for ${flows.length} flows, repeated +${d('redirects_repeated')}; refused: ${refused.map((n) => `${n} +${d(n)}`).join(', ') || 'none'}`,
  );
  c.note(
    `${clientHost}: ew_to_mux +${d('ew_to_mux')}, ew_fastpath_out +${d('ew_fastpath_out')}, ew_fastpath_local +${d('ew_fastpath_local')}, ew_return_local +${d('ew_return_local')}, ew_reply_in +${d('ew_reply_in')}`,
  );

  // ---- tshark's own decode of the same captures
  const fam = family === 4 ? 'ip' : 'ipv6';
  let tsMux = 0;
  let tsMuxOk = true;
  for (const m of config.muxes) {
    // one column per field name: over IPv4 ip.src holds the outer source and the inner one after it
    const rows = tsharkFields(
      join(run, 'pcaps', `${m.name}.pcap`),
      family === 4 ? ['ip.src'] : ['ip.src', 'ipv6.src'],
      `vxlan && ip.dst==${m.address.text}`,
    );
    if (rows === null) {
      tsMuxOk = false;
      continue;
    }
    tsMux += rows.filter((x) => x[0]!.split(',')[0] === clientPa && x[family === 4 ? 0 : 1]!.split(',').includes(client)).length;
  }
  if (tsMuxOk)
    c.check(
      tsMux === muxVxlanFromHosts,
      `tshark: the same number of VXLAN frames from ${clientHost} with the client inside at the MUXes`,
      `tshark ${tsMux}, slbx ${muxVxlanFromHosts}`,
    );
  const tsRedirects = tsharkFields(
    join(run, 'pcaps', `${clientHost}.pcap`),
    ['frame.number'],
    `udp.dstport==${REDIRECT_PORT} && ip.dst==${clientPa}`,
  );
  const tsFast = tsharkFields(
    join(run, 'pcaps', `${clientHost}.pcap`),
    ['ip.dst'],
    `vxlan && ip.src==${clientPa} && ${fam}.src==${client} && !(${[...muxPa].map((a) => `ip.dst==${a}`).join(' || ')})`,
  );
  if (tsRedirects !== null && tsFast !== null) {
    const ours = [...fastOnFabric.values()].reduce((a, m) => a + [...m.values()].reduce((x, y) => x + y, 0), 0);
    c.check(
      tsRedirects.length === redirects && tsFast.length === ours,
      `tshark: the same redirects and fast-path frames on ${clientHost}'s fabric`,
      `redirects tshark ${tsRedirects.length} / slbx ${redirects}; fast path tshark ${tsFast.length} / slbx ${ours} (to-MUX frames ${toMuxCount})`,
    );
  }
  const tsClient = tsharkFields(join(run, 'pcaps', `${clientNic.name}.pcap`), [`${fam}.src`, `${fam}.dst`], 'tcp || udp');
  if (tsClient !== null) {
    const peers = new Set(tsClient.map((x) => (x[0] === client ? x[1] : x[0])));
    c.check(
      peers.size === 1 && peers.has(vip),
      "tshark: the client VM's only peer is the VIP",
      `${tsClient.length} packets, peers ${[...peers].join(', ')}`,
    );
  }
  return c;
}

function parseIpFrom16(b: Uint8Array): string {
  const hex = Buffer.from(b).toString('hex');
  const groups = hex.match(/.{4}/g)!.join(':');
  return parseIp(groups).text;
}
