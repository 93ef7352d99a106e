// The host agent's worker steering, run by the kernel: N ring sockets in one PACKET_FANOUT_CBPF group on a
// "fabric" interface (the fabric program) and N in another group on a "port" interface (the VM port
// program), socket i of each group standing for worker i, both joined in index order. The tester ends
// inject both directions of many flows (steeringPairs: return path, outbound NAT, east-west, IPv4/IPv6,
// an IPv6 underlay, VLAN-tagged ports, fragments) and a frame without a key (ARP). Each frame carries its
// flow number and direction in its last 8 bytes. Run as root inside a network namespace that holds both
// veth pairs (test/host-steering.test.ts sets one up):
//
//   node dist/host-agent/worker-steering-check.js --fabric IF --fabric-tester IF --port IF --port-tester IF [--workers 2] [--flows 24]
//   ... --restarts [--workers 4] [--flows 8]     how leaving and joining again reorders a group (mainRestarts)
//
// Prints one JSON line: per flow the socket its fabric frames and its port frames reached (every one
// of them), what steeringKey() says, frames received per socket, the ARP frame's socket. It judges nothing:
// the test does.
import { pkt } from '../shared/packet-builder.js';
import { ip } from '../shared/addr.js';
import { isMain } from '../runtime/command.js';
import { loadRingAddon, RingPort, fanoutGroupId } from '../runtime/ring-port.js';
import {
  buildSteeringProgram,
  encodeSockFilters,
  steerWorker,
  steeringKey,
  STEER_FABRIC,
  STEER_PORT,
  type SteeringVips,
} from './worker-steering.js';

export const CHECK_VXLAN_PORT = 4789;
const TESTER_MAC = '02:aa:00:00:00:01';
export const CHECK_INTERNAL_VIP4 = '198.19.0.101';
export const CHECK_INTERNAL_VIP6 = '2001:db8:19::101';

/** The internal VIPs of the check's flows. */
export function checkVips(): SteeringVips {
  return { v4: [ip(CHECK_INTERNAL_VIP4).words[0]!], v6: [[...ip(CHECK_INTERNAL_VIP6).words]] };
}

/** One flow seen by a host agent: the frame that comes in on the fabric and the one from the VM's port. */
export interface SteeringPair {
  kind: string;
  fabric: Buffer;
  port: Buffer;
}

function tail(flow: number, dir: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt32BE(flow, 0);
  b.writeUInt32BE(dir, 4);
  return b;
}

/**
 * `perKind` flows of each kind, flow numbers from 0 in order, each with its fabric frame (VXLAN to the
 * host) and its port frame (from the backend), as a host agent sees the two directions of one flow.
 * Frames end with (flow, direction) so that a receiver can tell them apart.
 */
export function steeringPairs(perKind: number, fabricMac = '02:00:00:00:00:21', portMac = '02:00:00:00:00:31'): SteeringPair[] {
  const out: SteeringPair[] = [];
  const vx = (v6under: boolean) => {
    const b = pkt().eth({ src: TESTER_MAC, dst: fabricMac });
    return (v6under ? b.ipv6({ src: '2001:db8:ff::11', dst: '2001:db8:ff::21' }) : b.ipv4({ src: '198.18.0.11', dst: '198.18.0.21' }))
      .udp({ sport: 50000, dport: CHECK_VXLAN_PORT })
      .vxlan({ vni: 5001 })
      .eth({ src: '02:00:00:00:00:0a', dst: '02:00:00:00:01:10' });
  };
  const vm = (vlan?: number) => pkt().eth({ src: TESTER_MAC, dst: portMac, ...(vlan === undefined ? {} : { vlan }) });
  let flow = 0;
  const add = (kind: string, fabric: (f: number) => Buffer, port: (f: number) => Buffer) => {
    for (let i = 0; i < perKind; i++, flow++) out.push({ kind, fabric: fabric(flow), port: port(flow) });
  };
  const c4 = (f: number) => `198.51.100.${1 + (f % 250)}`;
  const c6 = (f: number) => `2001:db8:c::${(1 + f).toString(16)}`;
  const cport = (f: number) => 20000 + ((f * 7919) % 40000);
  // the return path: client -> VIP:80 in, DIP:8080 -> client out (NAT by the host agent in between)
  add(
    'return-v4',
    (f) =>
      vx(false)
        .ipv4({ src: c4(f), dst: '203.0.113.10' })
        .tcp({ sport: cport(f), dport: 80 })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm()
        .ipv4({ src: '192.0.2.10', dst: c4(f) })
        .tcp({ sport: 8080, dport: cport(f) })
        .payload(tail(f, 1))
        .build(),
  );
  add(
    'return-v6',
    (f) =>
      vx(false)
        .ipv6({ src: c6(f), dst: '2001:db8:f::10' })
        .tcp({ sport: cport(f), dport: 80 })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm()
        .ipv6({ src: '2001:db8:a::10', dst: c6(f) })
        .tcp({ sport: 8080, dport: cport(f) })
        .payload(tail(f, 1))
        .build(),
  );
  add(
    'return-v4-ipv6-underlay',
    (f) =>
      vx(true)
        .ipv4({ src: c4(f), dst: '203.0.113.10' })
        .udp({ sport: cport(f), dport: 53 })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm()
        .ipv4({ src: '192.0.2.10', dst: c4(f) })
        .udp({ sport: 53, dport: cport(f) })
        .payload(tail(f, 1))
        .build(),
  );
  add(
    'return-v4-vlan',
    (f) =>
      vx(false)
        .ipv4({ src: c4(f), dst: '203.0.113.10' })
        .tcp({ sport: cport(f), dport: 80 })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm(100)
        .ipv4({ src: '192.0.2.10', dst: c4(f) })
        .tcp({ sport: 8080, dport: cport(f) })
        .payload(tail(f, 1))
        .build(),
  );
  add(
    'return-v6-vlan',
    (f) =>
      vx(false)
        .ipv6({ src: c6(f), dst: '2001:db8:f::10' })
        .tcp({ sport: cport(f), dport: 80 })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm(200)
        .ipv6({ src: '2001:db8:a::10', dst: c6(f) })
        .tcp({ sport: 8080, dport: cport(f) })
        .payload(tail(f, 1))
        .build(),
  );
  // outbound NAT: DIP:port -> server out on the port; server -> frontend:port in (through a MUX)
  const srv4 = (f: number) => `203.0.113.${100 + (f % 50)}`;
  add(
    'snat-v4',
    (f) =>
      vx(false)
        .ipv4({ src: srv4(f), dst: '198.51.100.250' })
        .tcp({ sport: 443 + (f % 3), dport: 1024 + f })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm()
        .ipv4({ src: '192.0.2.10', dst: srv4(f) })
        .tcp({ sport: 40000 + f, dport: 443 + (f % 3) })
        .payload(tail(f, 1))
        .build(),
  );
  add(
    'snat-v6-udp',
    (f) =>
      vx(false)
        .ipv6({ src: c6(f), dst: '2001:db8:5::1' })
        .udp({ sport: 53, dport: 1024 + f })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm()
        .ipv6({ src: '2001:db8:a::10', dst: c6(f) })
        .udp({ sport: 40000 + f, dport: 53 })
        .payload(tail(f, 1))
        .build(),
  );
  // east-west, this host the client's: client -> internal VIP out on the port, the DIP host's reply in
  add(
    'east-west-client-v4',
    (f) =>
      vx(false)
        .ipv4({ src: CHECK_INTERNAL_VIP4, dst: '192.0.2.20' })
        .tcp({ sport: 80, dport: cport(f) })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm()
        .ipv4({ src: '192.0.2.20', dst: CHECK_INTERNAL_VIP4 })
        .tcp({ sport: cport(f), dport: 80 })
        .payload(tail(f, 1))
        .build(),
  );
  add(
    'east-west-client-v6',
    (f) =>
      vx(false)
        .ipv6({ src: CHECK_INTERNAL_VIP6, dst: '2001:db8:a::20' })
        .tcp({ sport: 80, dport: cport(f) })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm()
        .ipv6({ src: '2001:db8:a::20', dst: CHECK_INTERNAL_VIP6 })
        .tcp({ sport: cport(f), dport: 80 })
        .payload(tail(f, 1))
        .build(),
  );
  // east-west, this host the DIP's: client -> internal VIP in (from a MUX or, after Fastpath, its host)
  add(
    'east-west-backend-v4',
    (f) =>
      vx(false)
        .ipv4({ src: '192.0.2.20', dst: CHECK_INTERNAL_VIP4 })
        .tcp({ sport: cport(f), dport: 80 })
        .payload(tail(f, 0))
        .build(),
    (f) =>
      vm()
        .ipv4({ src: '192.0.2.10', dst: '192.0.2.20' })
        .tcp({ sport: 8080, dport: cport(f) })
        .payload(tail(f, 1))
        .build(),
  );
  // fragments (no ports after the first): keyed by the remote address alone
  add(
    'fragment-v4',
    (f) =>
      vx(false)
        .ipv4({ src: c4(f), dst: '203.0.113.10', fragOffset: 8, protocol: 17 })
        .payload(Buffer.concat([Buffer.alloc(16), tail(f, 0)]))
        .build(),
    (f) =>
      vm()
        .ipv4({ src: '192.0.2.10', dst: c4(f), fragOffset: 8, protocol: 17 })
        .payload(Buffer.concat([Buffer.alloc(16), tail(f, 1)]))
        .build(),
  );
  return out;
}

function arg(name: string, dflt?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : dflt;
  if (v === undefined) {
    process.stderr.write(`worker-steering-check.js: --${name} is required (--help)\n`);
    process.exit(2);
  }
  return v;
}

/**
 * --restarts: how the kernel orders a group's members when workers leave and join again. The key picks an
 * index (value modulo the group's size) into the group's member array, which the kernel keeps in join
 * order, except that a leaving member's slot is taken by the last member. Phases, each sending every
 * flow's two directions once and recording which WORKER (not socket index) got each:
 *   start      all N workers joined both groups in index order 0..N-1
 *   restart    worker 0 left both groups and joined again (as a restarted worker would)
 *   regrouped  every worker left both groups, then all joined in index order again
 *   two-died   (from index order) workers 0 and 1 left the fabric group in the order 0, 1 and the port
 *              group 1, 0 (two threads dying at once close their sockets in no set order), then joined
 *              again, 0 then 1
 *   regrouped-again  as regrouped
 * Prints one JSON line per run: per phase the flows whose directions reached different workers (split)
 * and those whose worker is not steerWorker(key, N) (the worker the index order names).
 */
async function mainRestarts(): Promise<void> {
  const workers = Number(arg('workers', '4'));
  const perKind = Number(arg('flows', '8'));
  const r = loadRingAddon();
  if (!('addon' in r)) throw new Error(r.error);
  const vips = checkVips();
  const ifaces = [arg('fabric'), arg('port')] as const;
  const progs = [
    encodeSockFilters(buildSteeringProgram(STEER_FABRIC, CHECK_VXLAN_PORT, vips)),
    encodeSockFilters(buildSteeringProgram(STEER_PORT, CHECK_VXLAN_PORT, vips)),
  ] as const;
  const groups = [fanoutGroupId(process.pid, 0), fanoutGroupId(process.pid, 1)] as const;
  // got[side].get(flow) = the workers that received it in the current phase
  let got: [Map<number, number[]>, Map<number, number[]>] = [new Map(), new Map()];
  const keys: [Map<number, number>, Map<number, number>] = [new Map(), new Map()];
  const member: (RingPort | null)[][] = [new Array<RingPort | null>(workers).fill(null), new Array<RingPort | null>(workers).fill(null)];
  const join = (side: 0 | 1, w: number): void => {
    const p = new RingPort(ifaces[side], r.addon, { fanoutGroup: groups[side], fanoutProgram: progs[side] });
    p.open(`ether src ${TESTER_MAC}`, (f, len) => {
      if (f[12] === 0x08 && f[13] === 0x06) return;
      const flow = f.readUInt32BE(len - 8);
      const l = got[side].get(flow) ?? [];
      l.push(w);
      got[side].set(flow, l);
      keys[side].set(flow, steeringKey(f, 0, len, side === 0 ? STEER_FABRIC : STEER_PORT, CHECK_VXLAN_PORT, vips));
    });
    member[side]![w] = p;
  };
  const leave = (side: 0 | 1, w: number): void => {
    member[side]![w]?.close();
    member[side]![w] = null;
  };
  const pairs = steeringPairs(perKind);
  const txF = new RingPort(arg('fabric-tester'), r.addon, { fanoutGroup: 0 });
  const txP = new RingPort(arg('port-tester'), r.addon, { fanoutGroup: 0 });
  txF.open('ether src 02:ff:ff:ff:ff:ff', () => {});
  txP.open('ether src 02:ff:ff:ff:ff:ff', () => {});
  const phase = async (name: string) => {
    got = [new Map(), new Map()];
    for (const p of pairs) {
      txF.send(p.fabric, 0, p.fabric.length);
      txP.send(p.port, 0, p.port.length);
    }
    txF.flush();
    txP.flush();
    await new Promise((res) => setTimeout(res, 500));
    let split = 0;
    let offIndex = 0;
    let missing = 0;
    pairs.forEach((_, f) => {
      const a = got[0].get(f);
      const b = got[1].get(f);
      if (a === undefined || b === undefined) {
        missing++;
        return;
      }
      if (new Set([...a, ...b]).size !== 1) split++;
      if (a[0] !== steerWorker(keys[0].get(f) ?? 0, workers)) offIndex++;
    });
    return { phase: name, flows: pairs.length, missing, split, offIndex };
  };
  const out = [];
  for (const side of [0, 1] as const) for (let w = 0; w < workers; w++) join(side, w);
  out.push(await phase('start'));
  for (const side of [0, 1] as const) leave(side, 0);
  for (const side of [0, 1] as const) join(side, 0);
  out.push(await phase('restart'));
  const regroup = () => {
    for (const side of [0, 1] as const) for (let w = 0; w < workers; w++) leave(side, w);
    for (let w = 0; w < workers; w++) for (const side of [0, 1] as const) join(side, w);
  };
  regroup();
  out.push(await phase('regrouped'));
  leave(0, 0);
  leave(0, 1);
  leave(1, 1);
  leave(1, 0);
  for (const side of [0, 1] as const) join(side, 0);
  for (const side of [0, 1] as const) join(side, 1);
  out.push(await phase('two-died'));
  regroup();
  out.push(await phase('regrouped-again'));
  txF.close();
  txP.close();
  for (const side of member) for (const p of side) p?.close();
  process.stdout.write(JSON.stringify({ workers, phases: out }) + '\n');
}

async function main(): Promise<void> {
  if (process.argv.includes('--restarts')) return mainRestarts();
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(
      'usage: node dist/host-agent/worker-steering-check.js --fabric IF --fabric-tester IF --port IF --port-tester IF [--workers 2] [--flows 24]\n' +
        'N ring sockets per interface in a PACKET_FANOUT_CBPF group with the host agent steering programs; both directions of\n' +
        'every flow injected from the tester ends; prints one JSON line (per flow the sockets of each direction). Root, in a netns.\n' +
        '--restarts: workers leave and join again (one restart, two at once, a regroup); per phase the flows split or moved.\n',
    );
    return;
  }
  const fabric = arg('fabric');
  const port = arg('port');
  const workers = Number(arg('workers', '2'));
  const perKind = Number(arg('flows', '24'));
  const r = loadRingAddon();
  if (!('addon' in r)) throw new Error(r.error);
  const vips = checkVips();
  const progs = {
    fabric: encodeSockFilters(buildSteeringProgram(STEER_FABRIC, CHECK_VXLAN_PORT, vips)),
    port: encodeSockFilters(buildSteeringProgram(STEER_PORT, CHECK_VXLAN_PORT, vips)),
  };
  // got[dir][flow] = the sockets that frame's copies reached (one entry per copy)
  const got: [Map<number, number[]>, Map<number, number[]>] = [new Map(), new Map()];
  const tsKeys: [Map<number, number>, Map<number, number>] = [new Map(), new Map()];
  const perSocket = [new Array<number>(workers).fill(0), new Array<number>(workers).fill(0)];
  let arpSocket = -1;
  const sockets: RingPort[] = [];
  const open = (iface: string, side: 0 | 1, group: number): void => {
    for (let i = 0; i < workers; i++) {
      const p = new RingPort(iface, r.addon, { fanoutGroup: group, fanoutProgram: side === 0 ? progs.fabric : progs.port });
      p.open(`ether src ${TESTER_MAC}`, (f, len) => {
        perSocket[side]![i]!++;
        if (f[12] === 0x08 && f[13] === 0x06) {
          arpSocket = i;
          return;
        }
        const flow = f.readUInt32BE(len - 8);
        const l = got[side].get(flow) ?? [];
        l.push(i);
        got[side].set(flow, l);
        tsKeys[side].set(flow, steeringKey(f, 0, len, side === 0 ? STEER_FABRIC : STEER_PORT, CHECK_VXLAN_PORT, vips));
      });
      sockets.push(p);
    }
  };
  open(fabric, 0, fanoutGroupId(process.pid, 0));
  open(port, 1, fanoutGroupId(process.pid, 1));
  const pairs = steeringPairs(perKind);
  const txF = new RingPort(arg('fabric-tester'), r.addon, { fanoutGroup: 0 });
  const txP = new RingPort(arg('port-tester'), r.addon, { fanoutGroup: 0 });
  txF.open('ether src 02:ff:ff:ff:ff:ff', () => {});
  txP.open('ether src 02:ff:ff:ff:ff:ff', () => {});
  const arp = pkt().eth({ src: TESTER_MAC, dst: 'ff:ff:ff:ff:ff:ff' }).arp({ senderIp: '192.0.2.10', targetIp: '192.0.2.1' }).build();
  let sent = 0;
  for (let round = 0; round < 2; round++) {
    for (const p of pairs) {
      if (txF.send(p.fabric, 0, p.fabric.length)) sent++;
      if (txP.send(p.port, 0, p.port.length)) sent++;
    }
    txF.flush();
    txP.flush();
    await new Promise((res) => setTimeout(res, 20));
  }
  if (txP.send(arp, 0, arp.length)) sent++;
  txP.flush();
  await new Promise((res) => setTimeout(res, 500));
  const refused = txF.deferredSendErrors() + txP.deferredSendErrors();
  txF.close();
  txP.close();
  const drops = sockets.reduce((s, p) => s + (p.stats()?.rxKernelDrops ?? 0), 0);
  for (const s of sockets) s.close();
  const flows = pairs.map((p, f) => ({
    flow: f,
    kind: p.kind,
    fabric: got[0].get(f) ?? [],
    port: got[1].get(f) ?? [],
    keyFabric: steerWorker(tsKeys[0].get(f) ?? 0, workers),
    keyPort: steerWorker(tsKeys[1].get(f) ?? 0, workers),
  }));
  process.stdout.write(
    JSON.stringify({
      workers,
      sent: sent - refused,
      received: perSocket[0]!.reduce((a, b) => a + b, 0) + perSocket[1]!.reduce((a, b) => a + b, 0),
      perSocket,
      kernelDrops: drops,
      arpSocket,
      flows,
    }) + '\n',
  );
}

if (isMain(import.meta.url)) {
  main().catch((e: unknown) => {
    process.stderr.write(`worker-steering-check.js: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
}
