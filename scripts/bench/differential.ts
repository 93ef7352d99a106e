// Differential run of two builds of the data planes: the same frames through the MUX's processPacket and
// the host agent's processInbound and processOutbound of an OLD and a NEW dist/ root, frame by frame,
// and every result compared: the verdict, the drop counter named (lastDrop), the frame written (MUX:
// out[0 .. outLen); host agent: outBuf[outOff .. outOff + outLen), the port, the NAT rule and the fabric
// peer), the input frame after the call (the host agent rewrites in place), and every counter. A
// refactor of the data planes that means to change nothing is shown to change nothing this way
// (docs/performance.md, "Differential run").
//
//   node dist/scripts/bench/differential.js --old OLD/dist --new dist [--frames N] [--seed S] [--json FILE]
//
// The frames come from this build's generators, the same for both roots: valid traffic (slbx-gen-traffic's
// client frames and backend replies, the MUX's own VXLAN output for the host agent, ICMP errors about
// those flows, fragments, ARP and neighbour solicitations for the gateways, replies too big for the DSR
// return) and the fuzzer's inputs (scripts/fuzz: its seeds mutated, and random bytes), mixed; each root
// runs on its own parse of the config and its own tables; before the host agent's outbound run, each
// records the backend replies' flows with its own learnReplyFlow (a reply leaves by DSR only for a
// recorded flow: without them the DSR rewrite would never be compared). Each function runs over an
// IPv4 underlay and an IPv6 one; the host agent's inbound also with the source MAC check on (some peers resolved to the MUX's
// MAC, some to another, some not yet: drop, hold and accept). The MUX's clock moves on every 10,000
// frames, with a sweep of its flow tables, so flows expire alike.
// Exit 0: identical; 1: the first difference, printed with the frame; 2: usage.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommandAsync, type CommandSpec } from '../../runtime/command.js';
import { mac } from '../../shared/addr.js';
import { pkt } from '../../shared/packet-builder.js';
import { TCP_ACK } from '../../shared/tcp.js';
import { clientFrames, replyFrames } from '../../cli/gen-traffic.js';
import { makeTargets } from '../fuzz/targets.js';
import { mutate, Rng } from '../fuzz/rng.js';

type MuxModule = typeof import('../../mux/data-plane.js');
type MuxTablesModule = typeof import('../../mux/tables.js');
type HostModule = typeof import('../../host-agent/data-plane.js');
type HostTablesModule = typeof import('../../host-agent/tables.js');
type DsrFlowsModule = typeof import('../../host-agent/dsr-flows.js');
type ConfigModule = typeof import('../../shared/config.js');
type MuxCtx = ReturnType<MuxModule['newMuxContext']>;
type HostCtx = ReturnType<HostModule['newHostContext']>;
type Config = import('../../shared/config.js').SlbxConfig;

/** One dist/ root's data planes, tables and config parser. */
interface Build {
  root: string;
  mux: MuxModule;
  muxTables: MuxTablesModule;
  host: HostModule;
  hostTables: HostTablesModule;
  dsrFlows: DsrFlowsModule;
  config: ConfigModule;
}

async function loadBuild(root: string): Promise<Build> {
  const at = (rel: string) => pathToFileURL(join(root, rel)).href;
  return {
    root,
    mux: (await import(at('mux/data-plane.js'))) as MuxModule,
    muxTables: (await import(at('mux/tables.js'))) as MuxTablesModule,
    host: (await import(at('host-agent/data-plane.js'))) as HostModule,
    hostTables: (await import(at('host-agent/tables.js'))) as HostTablesModule,
    dsrFlows: (await import(at('host-agent/dsr-flows.js'))) as DsrFlowsModule,
    config: (await import(at('shared/config.js'))) as ConfigModule,
  };
}

function parseWith(b: Build, text: string): Config {
  const r = b.config.parseConfig(text, 'differential.yaml');
  if (!r.ok) throw new Error(`${b.root}: the config is refused:\n${b.config.formatConfigErrors(r.errors, 'differential.yaml')}`);
  return r.config;
}

const MUX_MAC = '02:00:00:00:00:11';
const HOST_MAC = '02:00:00:00:00:21';
const OTHER_MAC = '02:00:00:00:00:99';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02', '02:00:00:01:00:03', '02:00:00:01:00:04'];

function newMux(b: Build, config: Config, underlay6: boolean): MuxCtx {
  const tables = b.muxTables.compileMuxTables(config, b.muxTables.ALL_HEALTHY, null, 1);
  for (const h of tables.hosts.values()) {
    h.mac.set(mac(HOST_MAC));
    h.macKnown = true;
  }
  const me = config.muxes[0]!;
  const ctx = b.mux.newMuxContext({
    tables,
    localMac: mac(MUX_MAC),
    localPa4: me.address.words[0]!,
    localPa6: me.address6?.words ?? null,
    underlay6,
    hashSeed: config.hashSeed,
    mtu: config.fabric.mtu,
    vxlanPort: config.fabric.vxlanPort,
    flowTable: config.flowTable,
  });
  ctx.icmpTokens = 50; // the rate limit is taken too (refilled as the clock moves)
  return ctx;
}

function newHost(b: Build, config: Config, host: string, macCheck: 'off' | 'drop' | 'hold'): HostCtx {
  const tables = b.hostTables.compileHostTables(config, host, 1);
  const ctx = b.host.newHostContext(
    tables,
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
  ctx.dsrMtu = 1400;
  if (macCheck !== 'off') {
    ctx.sourceMacCheck = true;
    ctx.holdUnresolved = macCheck === 'hold';
  }
  return ctx;
}

/**
 * The peers' MACs as the neighbour resolution may leave them: each resolved to the MUX's MAC (the frames'
 * source: 60 %), to another MAC (20 %) or not yet (20 %). Drawn again every 5,000 frames, alike for both builds.
 */
function rollPeerMacs(rng: Rng, b: Build, ctxs: readonly HostCtx[]): void {
  const right = b.hostTables.macKey(mac(MUX_MAC), 0);
  const wrong = b.hostTables.macKey(mac(OTHER_MAC), 0);
  const n = ctxs[0]!.peerMacs.length;
  for (let i = 0; i < n; i++) {
    const k = rng.int(5);
    const v = k < 3 ? right : k === 3 ? wrong : -1;
    for (const c of ctxs) c.peerMacs[i] = v;
  }
}

class Mismatch extends Error {}

function sameBytes(a: Uint8Array, aOff: number, b: Uint8Array, bOff: number, len: number): boolean {
  for (let i = 0; i < len; i++) if (a[aOff + i] !== b[bOff + i]) return false;
  return true;
}

function compareCounters(what: string, names: readonly string[], a: Float64Array, b: Float64Array): void {
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) throw new Mismatch(`${what}: counter ${names[i]} is ${a[i]} (old) and ${b[i]} (new)`);
  }
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** The tally of one run: verdicts and drop reasons seen (the same for both builds, or it stopped). */
interface RunReport {
  fn: 'mux' | 'host-in' | 'host-out';
  variant: string;
  frames: number;
  verdicts: Record<string, number>;
  dropReasons: number;
  mismatches: number;
  seconds: number;
  /** host-out: the backend replies' flows recorded before the run (each build's own learnReplyFlow). */
  flowsSeeded?: number;
}

function tally(r: RunReport, verdict: string): void {
  r.verdicts[verdict] = (r.verdicts[verdict] ?? 0) + 1;
}

// ---------------------------------------------------------------------------------------------
// Inputs

interface Inputs {
  /** MUX: valid client frames, then extras (ICMP errors about them, fragments, too big). */
  muxValid: Buffer[];
  /** host agent inbound, per host: the MUX's VXLAN frames for that host (each underlay). */
  inValid: Map<string, { v4: Buffer[]; v6: Buffer[] }>;
  /** host agent outbound, per host: [frame, port] */
  outValid: Map<string, [Buffer, number][]>;
}

function buildInputs(b: Build, config: Config): Inputs {
  const muxValid: Buffer[] = clientFrames(config, 48, 12);
  // ICMP errors about those flows (RFC 792 type 3 code 4 and time exceeded; ICMPv6 packet too big),
  // fragments (first and later ones), packets too big for the fabric, with and without DF, TCP ACKs
  const extras: Buffer[] = [];
  for (const v of config.vips) {
    for (const r of v.rules) {
      for (const proto of r.protocols) {
        for (let f = 0; f < 8; f++) {
          const client = v.address.family === 4 ? `198.51.100.${10 + (f % 4)}` : `2001:db8:c::${(0x10 + (f % 4)).toString(16)}`;
          const e = () => pkt().eth({ src: '02:00:00:00:00:01', dst: MUX_MAC });
          const quoted =
            v.address.family === 4 ? pkt().ipv4({ src: v.address.text, dst: client }) : pkt().ipv6({ src: v.address.text, dst: client });
          const q =
            proto === 6
              ? quoted.tcp({ sport: r.frontendPort, dport: 40000 + f }).build()
              : quoted
                  .udp({ sport: r.frontendPort, dport: 40000 + f })
                  .payload(8)
                  .build();
          if (v.address.family === 4) {
            extras.push(
              e()
                .ipv4({ src: '198.51.100.1', dst: v.address.text })
                .icmp({ type: f % 2 === 0 ? 3 : 11, code: f % 2 === 0 ? 4 : 0, rest: 1300 })
                .payload(q)
                .build(),
            );
            const ip = () => e().ipv4({ src: client, dst: v.address.text, flags: f % 2 === 0 ? 2 : 0 });
            extras.push(
              (proto === 6
                ? ip().tcp({ sport: 40000 + f, dport: r.frontendPort, flags: TCP_ACK })
                : ip().udp({ sport: 40000 + f, dport: r.frontendPort })
              )
                .payload(1560 + f)
                .build(),
            );
            extras.push(
              e()
                .ipv4({ src: client, dst: v.address.text, flags: 1 })
                .udp({ sport: 40000 + f, dport: r.frontendPort, length: 1000 })
                .payload(64)
                .build(),
            );
            extras.push(
              e()
                .ipv4({ src: client, dst: v.address.text, fragOffset: 8 + f, flags: f % 2 })
                .payload(200)
                .build(),
            );
          } else {
            extras.push(
              e()
                .ipv6({ src: '2001:db8:c::1', dst: v.address.text })
                .icmpv6({ type: f % 2 === 0 ? 2 : 3, rest: 1280 })
                .payload(q)
                .build(),
            );
            const ip = () => e().ipv6({ src: client, dst: v.address.text });
            extras.push(
              (proto === 6
                ? ip().tcp({ sport: 40000 + f, dport: r.frontendPort, flags: TCP_ACK })
                : ip().udp({ sport: 40000 + f, dport: r.frontendPort })
              )
                .payload(1540 + f)
                .build(),
            );
            extras.push(
              ip()
                .ext6({ type: 'fragment', more: true })
                .udp({ sport: 40000 + f, dport: r.frontendPort, length: 1000 })
                .payload(64)
                .build(),
            );
            extras.push(
              ip()
                .ext6({ type: 'fragment', offset8: 8 + f, more: f % 2 === 0 })
                .payload(200)
                .build(),
            );
          }
        }
      }
    }
  }
  muxValid.push(...extras);
  // the host agent's inbound: what this build's MUX sends for those, per host, over each underlay
  const inValid = new Map<string, { v4: Buffer[]; v6: Buffer[] }>();
  for (const h of config.hosts) inValid.set(h.name, { v4: [], v6: [] });
  for (const six of [false, true]) {
    const ctx = newMux(b, config, six);
    ctx.icmpTokens = Number.MAX_SAFE_INTEGER;
    for (const f of muxValid) {
      const w = Buffer.from(f);
      if (b.mux.processPacket(w, w.length, ctx) !== b.mux.VERDICT_FORWARD) continue;
      const set = inValid.get(ctx.lastNic!.host.name)!;
      (six ? set.v6 : set.v4).push(Buffer.from(ctx.out.subarray(0, ctx.outLen)));
    }
  }
  // and a MUX's latency echo requests (VNI 0) made of a few of them, each from its own UDP source port:
  // the daemon answers to the port processInbound leaves in ctx.udp (compared in runHostIn)
  for (const set of inValid.values()) {
    for (const list of [set.v4, set.v6]) {
      const n = Math.min(list.length, 8);
      for (let k = 0; k < n; k++) {
        const echo = latencyEchoOf(list[k]!, 41000 + k);
        if (echo !== null) list.push(echo);
      }
    }
  }
  // the host agent's outbound: backend replies (and their too-big and fragment forms), ARP and neighbour
  // solicitations for the gateways, packets to the gateway address
  const outValid = new Map<string, [Buffer, number][]>();
  for (const h of config.hosts) {
    const tables = b.hostTables.compileHostTables(config, h.name, 1);
    const portOf = (frame: Buffer) => tables.nics.findIndex((n) => sameBytes(n.mac, 0, frame, 6, 6));
    const list: [Buffer, number][] = [];
    for (const f of replyFrames(config, h.name, 24, 8)) list.push([f, portOf(f)]);
    for (const n of tables.nics) {
      const nic = config.nics.find((x) => x.name === n.name)!;
      const e = () => pkt().eth({ src: [...nic.mac].map((x) => x.toString(16).padStart(2, '0')).join(':'), dst: PORT_MACS[n.index]! });
      const net = config.networks.find((x) => x.name === nic.network)!;
      if (nic.address4 !== null && net.gateway != null) {
        list.push([e().arp({ senderIp: nic.address4.text, targetIp: net.gateway.text }).build(), n.index]);
        list.push([
          e().ipv4({ src: nic.address4.text, dst: net.gateway.text }).tcp({ sport: 80, dport: 33000, flags: TCP_ACK }).build(),
          n.index,
        ]);
        list.push([
          e()
            .ipv4({ src: nic.address4.text, dst: '198.51.100.10', flags: 2 })
            .tcp({ sport: 80, dport: 40001, flags: TCP_ACK })
            .payload(1460)
            .build(),
          n.index,
        ]);
        list.push([
          e()
            .ipv4({ src: nic.address4.text, dst: '198.51.100.10', flags: 1 })
            .udp({ sport: 7, dport: 40001, length: 900 })
            .payload(64)
            .build(),
          n.index,
        ]);
        list.push([e().ipv4({ src: nic.address4.text, dst: '198.51.100.10', fragOffset: 100 }).payload(300).build(), n.index]);
      }
      if (nic.address6 !== null && net.gateway6 != null) {
        list.push([
          e().ipv6({ src: nic.address6.text, dst: 'ff02::1:ff00:1' }).icmpv6({ type: 135 }).payload(ndBody(net.gateway6.words)).build(),
          n.index,
        ]);
        list.push([e().ipv6({ src: nic.address6.text, dst: net.gateway6.text }).udp({ sport: 7, dport: 33000 }).build(), n.index]);
        list.push([
          e()
            .ipv6({ src: nic.address6.text, dst: '2001:db8:c::10' })
            .tcp({ sport: 80, dport: 40001, flags: TCP_ACK })
            .payload(1400)
            .build(),
          n.index,
        ]);
        list.push([
          e()
            .ipv6({ src: nic.address6.text, dst: '2001:db8:c::10' })
            .ext6({ type: 'fragment', more: true })
            .udp({ sport: 7, dport: 40001, length: 900 })
            .payload(64)
            .build(),
          n.index,
        ]);
        list.push([
          e().ipv6({ src: nic.address6.text, dst: '2001:db8:c::10' }).ext6({ type: 'fragment', offset8: 100 }).payload(300).build(),
          n.index,
        ]);
      }
    }
    outValid.set(h.name, list);
  }
  return { muxValid, inValid, outValid };
}

/** A neighbour solicitation's body after the ICMPv6 header's first 4 bytes: reserved, the target, no option. */
function ndBody(target: Uint32Array): Uint8Array {
  const b = new Uint8Array(20);
  for (let i = 0; i < 4; i++) new DataView(b.buffer).setUint32(4 + i * 4, target[i]!);
  return b;
}

/** A frame from `valid` as it is (about 45 %), mutated (30 %), or the fuzzer's own input for the function (25 %). */
/**
 * A copy of VXLAN frame `f` (untagged, an IPv4 underlay without options or an IPv6 one without extension
 * headers) with VNI 0 and UDP source port `sport`, its UDP checksum updated (RFC 1624; none stays none);
 * null for another shape.
 */
function latencyEchoOf(f: Buffer, sport: number): Buffer | null {
  const type = f.readUInt16BE(12);
  const l4 = type === 0x0800 && f[14] === 0x45 ? 34 : type === 0x86dd ? 54 : -1;
  if (l4 < 0 || f.length < l4 + 16) return null;
  const e = Buffer.from(f);
  let sum = 0;
  for (const [off, v] of [
    [l4, sport],
    [l4 + 12, 0],
    [l4 + 14, e[l4 + 15]!],
  ] as const) {
    sum += (~e.readUInt16BE(off) & 0xffff) + v;
    e.writeUInt16BE(v, off);
  }
  const c0 = e.readUInt16BE(l4 + 6);
  if (c0 !== 0) {
    let c = (~c0 & 0xffff) + sum;
    c = (c & 0xffff) + (c >>> 16);
    c = (c & 0xffff) + (c >>> 16);
    c = ~c & 0xffff;
    e.writeUInt16BE(c === 0 ? 0xffff : c, l4 + 6);
  }
  return e;
}

function pickFrame(rng: Rng, valid: readonly Uint8Array[], fuzz: (rng: Rng) => Uint8Array): Uint8Array {
  const k = rng.int(20);
  if (k < 9 && valid.length > 0) return valid[rng.int(valid.length)]!;
  if (k < 15 && valid.length > 0) return mutate(rng, valid[rng.int(valid.length)]!);
  return fuzz(rng);
}

// ---------------------------------------------------------------------------------------------
// Runs

function runMux(
  oldB: Build,
  newB: Build,
  text: string,
  inputs: Inputs,
  fuzz: (rng: Rng) => Uint8Array,
  frames: number,
  seed: number,
  six: boolean,
): RunReport {
  const report: RunReport = {
    fn: 'mux',
    variant: six ? 'IPv6 underlay' : 'IPv4 underlay',
    frames,
    verdicts: {},
    dropReasons: 0,
    mismatches: 0,
    seconds: 0,
  };
  const a = newMux(oldB, parseWith(oldB, text), six);
  const b = newMux(newB, parseWith(newB, text), six);
  const names = a.counters.names;
  if (JSON.stringify(names) !== JSON.stringify(b.counters.names)) throw new Mismatch('mux: the counter names differ');
  const rng = new Rng(seed);
  const reasons = new Set<number>();
  const t0 = performance.now();
  for (let i = 0; i < frames; i++) {
    if (i % 10_000 === 9_999) {
      a.nowS++;
      b.nowS++;
      if (oldB.mux.sweepFlows(a, 4096) !== newB.mux.sweepFlows(b, 4096))
        throw new Mismatch(`mux: the sweep at frame ${i} expired different counts`);
    }
    const f = pickFrame(rng, inputs.muxValid, fuzz);
    const fa = Uint8Array.from(f);
    const fb = Uint8Array.from(f);
    const va = oldB.mux.processPacket(fa, fa.length, a);
    const vb = newB.mux.processPacket(fb, fb.length, b);
    const where = () => `mux (${report.variant}) frame ${i} ${hex(f)}`;
    if (va !== vb) throw new Mismatch(`${where()}: verdict ${va} (old), ${vb} (new)`);
    if (a.lastDrop !== b.lastDrop) throw new Mismatch(`${where()}: dropped as ${names[a.lastDrop]} (old), ${names[b.lastDrop]} (new)`);
    if (va === oldB.mux.VERDICT_FORWARD || va === oldB.mux.VERDICT_REPLY) {
      if (a.outLen !== b.outLen || !sameBytes(a.out, 0, b.out, 0, a.outLen))
        throw new Mismatch(`${where()}: output ${hex(a.out.subarray(0, a.outLen))} (old), ${hex(b.out.subarray(0, b.outLen))} (new)`);
      if ((a.lastNic?.id ?? -1) !== (b.lastNic?.id ?? -1))
        throw new Mismatch(`${where()}: nic ${a.lastNic?.id} (old), ${b.lastNic?.id} (new)`);
    }
    if (!sameBytes(fa, 0, fb, 0, fa.length)) throw new Mismatch(`${where()}: the input frame was left different`);
    if (a.ipId !== b.ipId || a.icmpTokens !== b.icmpTokens) throw new Mismatch(`${where()}: ipId or ICMP tokens differ`);
    compareCounters(where(), names, a.counters.values, b.counters.values);
    tally(report, va === 0 ? 'drop' : va === 1 ? 'forward' : va === 2 ? 'control' : 'reply');
    if (a.lastDrop >= 0) reasons.add(a.lastDrop);
  }
  if (a.flowLimit.count !== b.flowLimit.count || a.pendingLimit.count !== b.pendingLimit.count)
    throw new Mismatch('mux: the flow tables hold different counts at the end');
  report.seconds = (performance.now() - t0) / 1000;
  report.dropReasons = reasons.size;
  return report;
}

function hostResultsEqual(
  where: string,
  names: readonly string[],
  a: HostCtx,
  b: HostCtx,
  va: number,
  fa: Uint8Array,
  fb: Uint8Array,
): void {
  if (a.lastDrop !== b.lastDrop) throw new Mismatch(`${where}: dropped as ${names[a.lastDrop]} (old), ${names[b.lastDrop]} (new)`);
  if (a.lastPeer !== b.lastPeer) throw new Mismatch(`${where}: peer ${a.lastPeer} (old), ${b.lastPeer} (new)`);
  const ra = a.lastRule;
  const rb = b.lastRule;
  if (
    (ra === null) !== (rb === null) ||
    (ra !== null &&
      rb !== null &&
      (ra.vip.text !== rb.vip.text ||
        ra.dip.text !== rb.dip.text ||
        ra.frontendPort !== rb.frontendPort ||
        ra.backendPort !== rb.backendPort ||
        ra.protocol !== rb.protocol))
  ) {
    throw new Mismatch(
      `${where}: NAT rule ${JSON.stringify(ra && [ra.vip.text, ra.frontendPort])} (old), ${JSON.stringify(rb && [rb.vip.text, rb.frontendPort])} (new)`,
    );
  }
  if (va === 1 || va === 2) {
    if (
      a.outPort !== b.outPort ||
      a.outOff !== b.outOff ||
      a.outLen !== b.outLen ||
      !sameBytes(a.outBuf, a.outOff, b.outBuf, b.outOff, a.outLen)
    ) {
      throw new Mismatch(
        `${where}: output to port ${a.outPort} ${hex(a.outBuf.subarray(a.outOff, a.outOff + a.outLen))} (old), to port ${b.outPort} ${hex(b.outBuf.subarray(b.outOff, b.outOff + b.outLen))} (new)`,
      );
    }
  }
  if (!sameBytes(fa, 0, fb, 0, fa.length))
    throw new Mismatch(`${where}: the frame was rewritten differently: ${hex(fa)} (old), ${hex(fb)} (new)`);
}

const HOST_VERDICTS = ['drop', 'forward', 'local', 'hold'];

function runHostIn(
  oldB: Build,
  newB: Build,
  text: string,
  inputs: Inputs,
  fuzz: (rng: Rng) => Uint8Array,
  frames: number,
  seed: number,
  six: boolean,
  macCheck: 'off' | 'drop' | 'hold',
): RunReport {
  const variant = `${six ? 'IPv6' : 'IPv4'} underlay, source MAC check ${macCheck}`;
  const report: RunReport = { fn: 'host-in', variant, frames, verdicts: {}, dropReasons: 0, mismatches: 0, seconds: 0 };
  const ca = parseWith(oldB, text);
  const cb = parseWith(newB, text);
  const hosts = ca.hosts.map((h) => h.name);
  const as = hosts.map((h) => newHost(oldB, ca, h, macCheck));
  const bs = hosts.map((h) => newHost(newB, cb, h, macCheck));
  const names = as[0]!.counters.names;
  if (JSON.stringify(names) !== JSON.stringify(bs[0]!.counters.names)) throw new Mismatch('host agent: the counter names differ');
  const valid = hosts.map((h) => (six ? inputs.inValid.get(h)!.v6 : inputs.inValid.get(h)!.v4));
  const rng = new Rng(seed);
  const reasons = new Set<number>();
  const t0 = performance.now();
  for (let i = 0; i < frames; i++) {
    const k = rng.int(hosts.length);
    const a = as[k]!;
    const b = bs[k]!;
    if (macCheck !== 'off' && i % 5000 === 0) for (let h = 0; h < hosts.length; h++) rollPeerMacs(rng, newB, [as[h]!, bs[h]!]);
    const f = pickFrame(rng, valid[k]!, fuzz);
    const fa = Uint8Array.from(f);
    const fb = Uint8Array.from(f);
    const va = oldB.host.processInbound(fa, fa.length, a);
    const vb = newB.host.processInbound(fb, fb.length, b);
    const where = `host-in ${hosts[k]} (${variant}) frame ${i} ${hex(f)}`;
    if (va !== vb) throw new Mismatch(`${where}: verdict ${va} (old), ${vb} (new)`);
    hostResultsEqual(where, names, a, b, va, fa, fb);
    // a latency echo: the daemon answers to the UDP source port left in ctx.udp
    if (va === 2 && a.udp.srcPort !== b.udp.srcPort)
      throw new Mismatch(`${where}: latency echo from port ${a.udp.srcPort} (old), ${b.udp.srcPort} (new)`);
    compareCounters(where, names, a.counters.values, b.counters.values);
    tally(report, HOST_VERDICTS[va] ?? String(va));
    if (a.lastDrop >= 0) reasons.add(a.lastDrop);
  }
  report.seconds = (performance.now() - t0) / 1000;
  report.dropReasons = reasons.size;
  return report;
}

function runHostOut(
  oldB: Build,
  newB: Build,
  text: string,
  inputs: Inputs,
  fuzz: (rng: Rng) => Uint8Array,
  frames: number,
  seed: number,
  label: string,
): RunReport {
  const report: RunReport = { fn: 'host-out', variant: label, frames, verdicts: {}, dropReasons: 0, mismatches: 0, seconds: 0 };
  const ca = parseWith(oldB, text);
  const cb = parseWith(newB, text);
  const hosts = ca.hosts.map((h) => h.name);
  const as = hosts.map((h) => newHost(oldB, ca, h, 'off'));
  const bs = hosts.map((h) => newHost(newB, cb, h, 'off'));
  const names = as[0]!.counters.names;
  // the backend replies' flows recorded first, by each build's own return-path state (as if each client's
  // packet had come in through a MUX): a reply leaves by DSR only for a recorded flow, so without them
  // every reply would be compared as the same drop and the rewrite itself never (host-agent/dsr-flows.ts)
  let seeded = 0;
  hosts.forEach((h, k) => {
    for (const [f, port] of inputs.outValid.get(h)!) {
      const la = oldB.dsrFlows.learnReplyFlow(Uint8Array.from(f), f.length, port, as[k]!);
      const lb = newB.dsrFlows.learnReplyFlow(Uint8Array.from(f), f.length, port, bs[k]!);
      if (la !== lb) throw new Mismatch(`host-out ${h} seeding the reply's flow of ${hex(f)}: ${la} (old), ${lb} (new)`);
      if (la) seeded++;
    }
    compareCounters(`host-out ${h} after seeding the replies' flows`, names, as[k]!.counters.values, bs[k]!.counters.values);
  });
  if (seeded === 0) throw new Error('host-out: no reply flow could be recorded: the DSR rewrite would go unchecked');
  report.flowsSeeded = seeded;
  const rng = new Rng(seed);
  const reasons = new Set<number>();
  const t0 = performance.now();
  for (let i = 0; i < frames; i++) {
    const k = rng.int(hosts.length);
    const a = as[k]!;
    const b = bs[k]!;
    const list = inputs.outValid.get(hosts[k]!)!;
    const nicCount = a.tables.nics.length;
    let f: Uint8Array;
    let port: number;
    const pick = rng.int(20);
    if (pick < 9) {
      const [fr, p] = list[rng.int(list.length)]!;
      f = fr;
      port = p;
    } else if (pick < 15) {
      const [fr, p] = list[rng.int(list.length)]!;
      f = mutate(rng, fr);
      port = p;
    } else {
      f = fuzz(rng);
      port = rng.int(nicCount);
    }
    if (rng.int(50) === 0) port = rng.int(nicCount + 1); // now and then the wrong port, or none
    const fa = Uint8Array.from(f);
    const fb = Uint8Array.from(f);
    const va = oldB.host.processOutbound(fa, fa.length, port, a);
    const vb = newB.host.processOutbound(fb, fb.length, port, b);
    const where = `host-out ${hosts[k]} port ${port} frame ${i} ${hex(f)}`;
    if (va !== vb) throw new Mismatch(`${where}: verdict ${va} (old), ${vb} (new)`);
    hostResultsEqual(where, names, a, b, va, fa, fb);
    compareCounters(where, names, a.counters.values, b.counters.values);
    tally(report, HOST_VERDICTS[va] ?? String(va));
    if (a.lastDrop >= 0) reasons.add(a.lastDrop);
  }
  report.seconds = (performance.now() - t0) / 1000;
  report.dropReasons = reasons.size;
  return report;
}

// ---------------------------------------------------------------------------------------------

const OPTIONS: OptionSpec[] = [
  { name: 'old', value: 'DIR', help: "the old build's dist/ root (the folder with mux/, host-agent/, shared/)" },
  { name: 'new', value: 'DIR', help: "the new build's dist/ root (default: the dist/ this script runs from)" },
  { name: 'frames', value: 'N', help: 'frames per function (split over its variants)', default: '1000000' },
  { name: 'seed', value: 'S', help: 'seed of the generator (uint32)', default: '1' },
  { name: 'config', value: 'FILE', help: "slbx config (default: the checkout's examples/lab.yaml)" },
  { name: 'json', value: 'FILE', help: 'write the reports as JSON' },
  { name: 'help', help: 'show this help' },
];

const COMMAND: CommandSpec = {
  program: 'differential',
  usage: 'node dist/scripts/bench/differential.js --old OLD/dist [--new NEW/dist] [--frames N] [--seed S] [--config FILE] [--json FILE]',
  options: OPTIONS,
  noPositional: true,
  about:
    "Runs the same frames through the data planes of two builds (the MUX's processPacket, the host agent's processInbound and processOutbound) and compares every verdict, output byte and counter. Exit 0: identical; 1: the first difference, printed with its frame.",
};

const DIST = fileURLToPath(new URL('../..', import.meta.url));

export async function main(args: ParsedArgs): Promise<number> {
  const oldRoot = one(args, 'old');
  if (oldRoot === undefined) {
    process.stderr.write('differential: --old is required (see --help)\n');
    return 2;
  }
  const newRoot = resolve(one(args, 'new') ?? DIST);
  const frames = Number(one(args, 'frames') ?? '1000000');
  const seed = Number(one(args, 'seed') ?? '1');
  if (!Number.isInteger(frames) || frames < 6) {
    process.stderr.write('differential: --frames must be an integer of at least 6\n');
    return 2;
  }
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    process.stderr.write('differential: --seed must be a uint32\n');
    return 2;
  }
  const cfgFile = one(args, 'config') ?? join(DIST, '..', 'examples', 'lab.yaml');
  const text4 = readFileSync(cfgFile, 'utf8');
  const raw = parseYaml(text4) as { fabric: Record<string, unknown> };
  raw.fabric.underlay = 'ipv6';
  const text6 = stringifyYaml(raw);
  const oldB = await loadBuild(resolve(oldRoot));
  const newB = await loadBuild(newRoot);
  const config = parseWith(newB, text4);
  const inputs = buildInputs(newB, config);
  const targets = makeTargets(config, text4);
  const fuzzOf = (name: string) => {
    const t = targets.find((x) => x.name === name)!;
    return (rng: Rng) => t.make(rng) as Uint8Array;
  };
  const third = Math.floor(frames / 3);
  const reports: RunReport[] = [];
  try {
    const half = Math.floor(frames / 2);
    reports.push(runMux(oldB, newB, text4, inputs, fuzzOf('mux-data-plane'), half, seed, false));
    reports.push(runMux(oldB, newB, text6, inputs, fuzzOf('mux-data-plane'), frames - half, seed + 1, true));
    const fuzzIn = fuzzOf('host-inbound');
    reports.push(runHostIn(oldB, newB, text4, inputs, fuzzIn, third, seed + 2, false, 'off'));
    reports.push(runHostIn(oldB, newB, text6, inputs, fuzzIn, third, seed + 3, true, 'hold'));
    reports.push(runHostIn(oldB, newB, text4, inputs, fuzzIn, frames - 2 * third, seed + 4, false, 'drop'));
    reports.push(runHostOut(oldB, newB, text4, inputs, fuzzOf('host-outbound'), frames, seed + 5, "every host's ports"));
  } catch (e) {
    if (!(e instanceof Mismatch)) throw e;
    for (const r of reports) printReport(r);
    process.stdout.write(`DIFFERENT: ${e.message}\n`);
    return 1;
  }
  process.stdout.write(`differential run, old ${oldB.root}, new ${newB.root}, seed ${seed}, node ${process.version}\n`);
  for (const r of reports) printReport(r);
  const total = reports.reduce((s, r) => s + r.frames, 0);
  process.stdout.write(`identical: ${total} frames, every verdict, output byte and counter\n`);
  const json = one(args, 'json');
  if (json !== undefined)
    writeFileSync(
      json,
      `${JSON.stringify({ bench: 'differential', node: process.version, old: oldB.root, new: newB.root, seed, reports }, null, 2)}\n`,
    );
  return 0;
}

function printReport(r: RunReport): void {
  const v = Object.entries(r.verdicts)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  process.stdout.write(
    `  ${r.fn.padEnd(9)} ${r.variant.padEnd(42)} ${String(r.frames).padStart(8)} frames  ${v}; ${r.dropReasons} drop reasons${r.flowsSeeded !== undefined ? `; ${r.flowsSeeded} reply flows recorded first` : ''}  (${r.seconds.toFixed(1)} s)\n`,
  );
}

if (isMain(import.meta.url)) process.exitCode = await runCommandAsync(COMMAND, process.argv.slice(2), main);
