// The data-plane paths the micro benches time or count: the same frames through the MUX's processPacket
// and the host agent's processInbound and processOutbound, per path (TCP/UDP, IPv4/IPv6, a new flow or an
// existing one, 64- and 1400-byte frames), built with this build's packet builder from the lab config.
// The data planes come from a Planes value: this build's (currentPlanes, for micro.ts) or another dist/
// root's (loadPlanes, for micro-count.ts comparing two builds on identical frames).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ip, mac } from '../../shared/addr.js';
import type { SlbxConfig } from '../../shared/config.js';
import { pkt } from '../../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../../shared/tcp.js';
import * as muxPlane from '../../mux/data-plane.js';
import * as muxTables from '../../mux/tables.js';
import * as hostPlane from '../../host-agent/data-plane.js';
import * as hostTables from '../../host-agent/tables.js';
import * as hostSnat from '../../host-agent/snat.js';
import * as hostFlowTable from '../../host-agent/flow-table.js';
import { FlowJournalBuffer } from '../../host-agent/flow-journal.js';

type MuxContext = muxPlane.MuxContext;
type HostContext = hostPlane.HostContext;

/** One build's data planes and their tables. */
export interface Planes {
  mux: typeof muxPlane;
  muxTables: typeof muxTables;
  host: typeof hostPlane;
  hostTables: typeof hostTables;
  /** Outbound NAT's engine and its flow table (undefined: a build before issue 15; no SNAT paths). */
  snat?: { engine: typeof hostSnat; flowTable: typeof hostFlowTable };
}

export const currentPlanes: Planes = {
  mux: muxPlane,
  muxTables,
  host: hostPlane,
  hostTables,
  snat: { engine: hostSnat, flowTable: hostFlowTable },
};

/** The data planes of another dist/ root (an older build). */
export async function loadPlanes(root: string): Promise<Planes> {
  const at = (rel: string) => pathToFileURL(join(root, rel)).href;
  return {
    mux: (await import(at('mux/data-plane.js'))) as Planes['mux'],
    muxTables: (await import(at('mux/tables.js'))) as Planes['muxTables'],
    host: (await import(at('host-agent/data-plane.js'))) as Planes['host'],
    hostTables: (await import(at('host-agent/tables.js'))) as Planes['hostTables'],
    snat: await import(at('host-agent/snat.js')).then(
      async (engine: typeof hostSnat) => ({ engine, flowTable: (await import(at('host-agent/flow-table.js'))) as typeof hostFlowTable }),
      () => undefined,
    ),
  };
}

export const MUX_MAC = '02:00:00:00:00:11';
export const ROUTER_MAC = '02:00:00:00:00:01';
export const HOST1_MAC = '02:00:00:00:00:21';
export const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02'];
export const NIC = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10', ip6: '2001:db8:d::10' };
export const CLIENT = '198.51.100.10';
export const CLIENT6 = '2001:db8:c::10';
export const VIP = '203.0.113.10';
export const VIP6 = '2001:db8:ff::10';
export const FRAMES = 4096; // distinct flows per path (a power of two)
/** Outbound NAT's paths: the frontend IPs of a rule for NIC (h1vm1) and the remote endpoint its backend calls. */
export const SNAT_FIP = '203.0.113.200';
export const SNAT_FIP6 = '2001:db8:ff::200';
export const SNAT_REMOTE = '198.51.100.20';
export const SNAT_REMOTE6 = '2001:db8:c::20';

export function newMux(config: SlbxConfig, planes: Planes = currentPlanes): MuxContext {
  const tables = planes.muxTables.compileMuxTables(config, planes.muxTables.ALL_HEALTHY, null, 1);
  for (const h of tables.hosts.values()) {
    h.mac.set(mac(HOST1_MAC));
    h.macKnown = true;
  }
  return planes.mux.newMuxContext({
    tables,
    localMac: mac(MUX_MAC),
    localPa4: config.muxes[0]!.address.words[0]!,
    hashSeed: config.hashSeed,
    mtu: config.fabric.mtu,
    vxlanPort: config.fabric.vxlanPort,
    flowTable: { ...config.flowTable, maxFlows: 10_000_000 },
  });
}

export interface Case {
  plane: 'mux' | 'host-in' | 'host-out';
  path: string;
  /** One iteration; i counts up from 0. Returns the verdict (checked once, before timing). */
  step: (i: number) => number;
  /** host agent: the restore copy alone. */
  copy?: (i: number) => number;
}

export function payload(frameLen: number, headers: number): Uint8Array {
  return new Uint8Array(Math.max(0, frameLen - headers));
}

function muxCases(config: SlbxConfig, planes: Planes, frames: number): Case[] {
  const cases: Case[] = [];
  const processPacket = planes.mux.processPacket;
  const add = (path: string, frames: Buffer[], isNew: boolean, v6: boolean) => {
    const ctx = newMux(config, planes);
    const mask = frames.length - 1;
    cases.push({
      plane: 'mux',
      path,
      step: isNew
        ? (i) => {
            if ((i & mask) === 0) (v6 ? ctx.flows6 : ctx.flows4).clear();
            const f = frames[i & mask]!;
            return processPacket(f, f.length, ctx);
          }
        : (i) => {
            const f = frames[i & mask]!;
            return processPacket(f, f.length, ctx);
          },
    });
  };
  const eth = () => pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC });
  const range = (fn: (k: number) => Buffer) => Array.from({ length: frames }, (_, k) => fn(k));
  const udp4 = (len: number) =>
    range((k) =>
      eth()
        .ipv4({ src: CLIENT, dst: VIP })
        .udp({ sport: 1024 + k, dport: 7, checksum: 'zero' })
        .payload(payload(len, 42))
        .build(),
    );
  const tcp4 = (flags: number) =>
    range((k) =>
      eth()
        .ipv4({ src: CLIENT, dst: VIP })
        .tcp({ sport: 1024 + k, dport: 80, flags })
        .build(),
    );
  const udp6 = () =>
    range((k) =>
      eth()
        .ipv6({ src: CLIENT6, dst: VIP6 })
        .udp({ sport: 1024 + k, dport: 7 })
        .payload(payload(64, 62))
        .build(),
    );
  const tcp6 = (flags: number) =>
    range((k) =>
      eth()
        .ipv6({ src: CLIENT6, dst: VIP6 })
        .tcp({ sport: 1024 + k, dport: 80, flags })
        .build(),
    );
  add('udp4 existing flow, 64 B', udp4(64), false, false);
  add('udp4 new flow, 64 B', udp4(64), true, false);
  add('udp4 existing flow, 1400 B', udp4(1400), false, false);
  add('tcp4 existing flow (ACK)', tcp4(TCP_ACK), false, false);
  add('tcp4 new flow (SYN)', tcp4(TCP_SYN), true, false);
  add('udp6 existing flow', udp6(), false, true);
  add('udp6 new flow', udp6(), true, true);
  add('tcp6 existing flow (ACK)', tcp6(TCP_ACK), false, true);
  add('tcp6 new flow (SYN)', tcp6(TCP_SYN), true, true);
  return cases;
}

function hostCases(config: SlbxConfig, planes: Planes, frames: number): Case[] {
  const cases: Case[] = [];
  const { processInbound, processOutbound } = planes.host;
  const newHost = (): HostContext =>
    planes.host.newHostContext(
      planes.hostTables.compileHostTables(config, 'host1', 1),
      config.fabric.vxlanPort,
      PORT_MACS.map((m) => mac(m)),
    );
  /**
   * seed: the clients' packets of the replies' flows, given to processInbound first: a reply leaves by
   * DSR only for a flow the host agent recorded (host-agent/dsr-flows.ts), so each host-out path
   * measures a recorded flow's reply (the entry found, refreshed for TCP), not the drop of an unsolicited one.
   */
  const inFrames = new Map<string, Buffer[]>();
  const add = (plane: 'host-in' | 'host-out', path: string, frames: Buffer[], seed: Buffer[] = []) => {
    if (plane === 'host-in') inFrames.set(path, frames);
    const ctx = newHost();
    for (const f of seed) {
      const w = Buffer.from(f);
      if (processInbound(w, w.length, ctx) !== planes.host.VERDICT_FORWARD)
        throw new Error(`bench ${path}: a seed frame was not delivered`);
    }
    const mask = frames.length - 1;
    const work = frames.map((f) => Buffer.from(f));
    cases.push({
      plane,
      path,
      step:
        plane === 'host-in'
          ? (i) => {
              const k = i & mask;
              const w = work[k]!;
              w.set(frames[k]!);
              return processInbound(w, w.length, ctx);
            }
          : (i) => {
              const k = i & mask;
              const w = work[k]!;
              w.set(frames[k]!);
              return processOutbound(w, w.length, 0, ctx);
            },
      copy: (i) => {
        const k = i & mask;
        const w = work[k]!;
        w.set(frames[k]!);
        return w[0]!;
      },
    });
  };
  const range = (fn: (k: number) => Buffer) => Array.from({ length: frames }, (_, k) => fn(k));
  const vx = () =>
    pkt()
      .eth({ src: MUX_MAC, dst: HOST1_MAC })
      .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
      .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
      .vxlan({ vni: 5001 });
  add(
    'host-in',
    'udp4, 64 B inner',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac })
        .ipv4({ src: CLIENT, dst: VIP })
        .udp({ sport: 1024 + k, dport: 7 })
        .payload(payload(64, 42))
        .build(),
    ),
  );
  add(
    'host-in',
    'udp4, 1400 B inner',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac })
        .ipv4({ src: CLIENT, dst: VIP })
        .udp({ sport: 1024 + k, dport: 7 })
        .payload(payload(1400, 42))
        .build(),
    ),
  );
  add(
    'host-in',
    'tcp4',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac })
        .ipv4({ src: CLIENT, dst: VIP })
        .tcp({ sport: 1024 + k, dport: 80, flags: TCP_ACK })
        .build(),
    ),
  );
  add(
    'host-in',
    'udp6',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac, type: 0x86dd })
        .ipv6({ src: CLIENT6, dst: VIP6 })
        .udp({ sport: 1024 + k, dport: 7 })
        .payload(payload(64, 62))
        .build(),
    ),
  );
  add(
    'host-in',
    'tcp6',
    range((k) =>
      vx()
        .eth({ src: MUX_MAC, dst: NIC.mac, type: 0x86dd })
        .ipv6({ src: CLIENT6, dst: VIP6 })
        .tcp({ sport: 1024 + k, dport: 80, flags: TCP_ACK })
        .build(),
    ),
  );
  const back = () => pkt().eth({ src: NIC.mac, dst: PORT_MACS[0] });
  add(
    'host-out',
    'udp4 reply, 64 B',
    range((k) =>
      back()
        .ipv4({ src: NIC.ip, dst: CLIENT })
        .udp({ sport: 7, dport: 1024 + k })
        .payload(payload(64, 42))
        .build(),
    ),
    inFrames.get('udp4, 64 B inner'),
  );
  add(
    'host-out',
    'udp4 reply, 1400 B',
    range((k) =>
      back()
        .ipv4({ src: NIC.ip, dst: CLIENT })
        .udp({ sport: 7, dport: 1024 + k })
        .payload(payload(1400, 42))
        .build(),
    ),
    inFrames.get('udp4, 64 B inner'),
  );
  add(
    'host-out',
    'tcp4 reply',
    range((k) =>
      back()
        .ipv4({ src: NIC.ip, dst: CLIENT })
        .tcp({ sport: 80, dport: 1024 + k, flags: TCP_ACK })
        .build(),
    ),
    inFrames.get('tcp4'),
  );
  add(
    'host-out',
    'udp6 reply',
    range((k) =>
      back()
        .ipv6({ src: NIC.ip6, dst: CLIENT6 })
        .udp({ sport: 7, dport: 1024 + k })
        .payload(payload(64, 62))
        .build(),
    ),
    inFrames.get('udp6'),
  );
  add(
    'host-out',
    'tcp6 reply',
    range((k) =>
      back()
        .ipv6({ src: NIC.ip6, dst: CLIENT6 })
        .tcp({ sport: 80, dport: 1024 + k, flags: TCP_ACK })
        .build(),
    ),
    inFrames.get('tcp6'),
  );
  if (planes.snat !== undefined) cases.push(...snatCases(config, planes, planes.snat, frames));
  return cases;
}

/**
 * Outbound NAT (docs/outbound.md) through the whole host data plane: host1's tables compiled with an
 * outbound rule for h1vm1 (frontend SNAT_FIP and SNAT_FIP6, all of 1024-65535), its engine installed as
 * the daemon's is (ctx.snat). Existing flows: each of the `frames` flows opened first (the SYN out, the
 * SYN-ACK back: ESTABLISHED), then its ACKs measured out (IPv4, IPv6) and back (IPv4). New flows: every
 * iteration a SYN of another source port; every `frames` iterations a fresh engine (its ports would run
 * out and its table fill up otherwise), so the path's cost includes 1/frames of an empty engine's set-up.
 * Each new flow appends its flow journal record, encoded (times, CRC-32s) every 1,000 records as a
 * daemon with --state-dir does at the end of an event-loop turn (the write(2) itself not included).
 */
function snatCases(config: SlbxConfig, planes: Planes, snat: NonNullable<Planes['snat']>, frames: number): Case[] {
  const { processInbound, processOutbound, VERDICT_FORWARD } = planes.host;
  const outbound = {
    name: 'bench-out',
    frontendIps: [ip(SNAT_FIP), ip(SNAT_FIP6)],
    pool: null,
    nics: ['h1vm1'],
    protocol: 'all' as const,
    protocols: [6, 17] as const,
    portsPerNic: 64_512,
    portsAuto: false,
    preallocatedPorts: 64,
    idleTimeoutMin: 4,
    tcpResetOnIdle: false,
  };
  const cfg = { ...config, outbound: [outbound] } as unknown as SlbxConfig;
  const tables = planes.hostTables.compileHostTables(cfg, 'host1', 1);
  const nic = tables.nics.find((n) => n.name === 'h1vm1');
  if (nic === undefined) throw new Error('bench snat: the config has no nic h1vm1 on host1');
  const ranges = [SNAT_FIP, SNAT_FIP6].map((a) => ({ ip: a, first: 1024, last: 65535, host: 'host1', nic: 'h1vm1' }));
  const policy = snat.engine.snatPoliciesFor(cfg, ranges, 'host1').get('h1vm1')!;
  // the flow journal a daemon with --state-dir gives the engine (host-agent/flow-journal.ts): a new flow
  // appends a record; every 1,000 records they are encoded, as at the end of an event-loop turn
  const buffer = new FlowJournalBuffer();
  const journal = {
    addSnat(type: number, record: Uint32Array): void {
      buffer.addSnat(type, record);
      if (buffer.pending >= 1000) buffer.encode(100, 0);
    },
  };
  const newEngine = () => {
    const e = new snat.engine.SnatEngine(new snat.flowTable.HostFlowTable(4 * frames), 2 * frames);
    e.setNic(nic.index, policy);
    e.journal = journal;
    return e;
  };
  const newCtx = (): HostContext => {
    const ctx = planes.host.newHostContext(
      tables,
      cfg.fabric.vxlanPort,
      PORT_MACS.map((m) => mac(m)),
    );
    ctx.snat = newEngine();
    ctx.ew.nowS = 100;
    return ctx;
  };
  const range = (fn: (k: number) => Buffer) => Array.from({ length: frames }, (_, k) => fn(k));
  const fromNic = () => pkt().eth({ src: NIC.mac, dst: PORT_MACS[nic.index] });
  const syn4 = range((k) =>
    fromNic()
      .ipv4({ src: NIC.ip, dst: SNAT_REMOTE })
      .tcp({ sport: 1024 + k, dport: 9000, flags: TCP_SYN })
      .build(),
  );
  const syn6 = range((k) =>
    fromNic()
      .ipv6({ src: NIC.ip6, dst: SNAT_REMOTE6 })
      .tcp({ sport: 1024 + k, dport: 9000, flags: TCP_SYN })
      .build(),
  );
  const ack4 = range((k) =>
    fromNic()
      .ipv4({ src: NIC.ip, dst: SNAT_REMOTE })
      .tcp({ sport: 1024 + k, dport: 9000, flags: TCP_ACK })
      .build(),
  );
  const ack6 = range((k) =>
    fromNic()
      .ipv6({ src: NIC.ip6, dst: SNAT_REMOTE6 })
      .tcp({ sport: 1024 + k, dport: 9000, flags: TCP_ACK })
      .build(),
  );
  const fromMux = (v6: boolean, fport: number, flags: number) =>
    pkt()
      .eth({ src: MUX_MAC, dst: HOST1_MAC })
      .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
      .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
      .vxlan({ vni: policy.vni })
      .eth({ src: MUX_MAC, dst: NIC.mac, type: v6 ? 0x86dd : 0x0800 })
      [v6 ? 'ipv6' : 'ipv4']({ src: v6 ? SNAT_REMOTE6 : SNAT_REMOTE, dst: v6 ? SNAT_FIP6 : SNAT_FIP })
      .tcp({ sport: 9000, dport: fport, flags })
      .build();
  /** Opens every flow (SYN out, SYN-ACK back); returns the replies' ACK frames to frontend:port. */
  const open = (ctx: HostContext, syns: Buffer[], v6: boolean): Buffer[] =>
    syns.map((f) => {
      const w = Buffer.from(f);
      if (processOutbound(w, w.length, nic.index, ctx) !== VERDICT_FORWARD) throw new Error('bench snat: a SYN was not translated');
      const fport = ctx.outBuf[ctx.outOff + (v6 ? 40 : 20)]! * 256 + ctx.outBuf[ctx.outOff + (v6 ? 41 : 21)]!;
      const r = fromMux(v6, fport, TCP_SYN | TCP_ACK);
      if (processInbound(r, r.length, ctx) !== VERDICT_FORWARD) throw new Error('bench snat: a SYN-ACK was not delivered');
      return fromMux(v6, fport, TCP_ACK);
    });
  const mask = frames - 1;
  const cases: Case[] = [];
  const add = (plane: 'host-in' | 'host-out', path: string, ctx: HostContext, fs: Buffer[], isNew = false) => {
    const work = fs.map((f) => Buffer.from(f));
    const run =
      plane === 'host-in' ? (w: Buffer) => processInbound(w, w.length, ctx) : (w: Buffer) => processOutbound(w, w.length, nic.index, ctx);
    cases.push({
      plane,
      path,
      step: (i) => {
        const k = i & mask;
        if (isNew && k === 0) ctx.snat = newEngine();
        const w = work[k]!;
        w.set(fs[k]!);
        return run(w);
      },
      copy: (i) => {
        const k = i & mask;
        const w = work[k]!;
        w.set(fs[k]!);
        return w[0]!;
      },
    });
  };
  const c4 = newCtx();
  const replies4 = open(c4, syn4, false);
  add('host-out', 'snat tcp4 existing flow (ACK)', c4, ack4);
  add('host-in', 'snat tcp4 reply (ACK)', c4, replies4);
  const c6 = newCtx();
  open(c6, syn6, true);
  add('host-out', 'snat tcp6 existing flow (ACK)', c6, ack6);
  const cn = newCtx();
  add('host-out', 'snat tcp4 new flow (SYN)', cn, syn4, true);
  // every packet of three rounds over the frames is translated and opens a flow of its own (without the
  // fresh engine, a round's SYNs would find the last round's flows and the path would time existing ones)
  const c = cases[cases.length - 1]!;
  for (let i = 0; i < 3 * frames; i++)
    if (c.step(i) !== VERDICT_FORWARD || cn.snat?.live !== (i & mask) + 1)
      throw new Error(`bench ${c.path}: packet ${i} opened no new flow (${cn.snat?.live} live)`);
  return cases;
}

/**
 * Every path, MUX first, each over `frames` distinct flows (a power of two: the new-flow paths empty the
 * flow table every `frames` frames).
 */
export function pathCases(config: SlbxConfig, planes: Planes = currentPlanes, frames = FRAMES): Case[] {
  if (frames < 1 || (frames & (frames - 1)) !== 0) throw new Error(`pathCases: frames must be a power of two, not ${frames}`);
  return [...muxCases(config, planes, frames), ...hostCases(config, planes, frames)];
}

/** The verdict a path's step must return. */
export function forwardVerdict(c: Case, planes: Planes = currentPlanes): number {
  return c.plane === 'mux' ? planes.mux.VERDICT_FORWARD : planes.host.VERDICT_FORWARD;
}
