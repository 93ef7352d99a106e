// The same packet fixtures through both capture/injection implementations (--io pcap and --io ring), on
// a real veth pair, compared byte for byte with what the pure data planes produce offline. Run as root
// inside a network namespace that holds both ends of a veth pair (test/ring-port.test.ts sets one up):
//
//   node dist/scripts/bench/port-check.js --io pcap|ring --dut IF --tester IF [--via 198.18.0.2]
//
// The DSR part routes by --via: an address on the DUT's subnet that is not local, with a static
// neighbour entry for the tester's MAC (both ends are in one namespace, so a local address would loop
// the packets back inside the kernel).
// The DUT end plays the daemons: a port from runtime/frame-port.ts opened with the daemon's own capture
// filter, the data plane on every frame, the result sent the way the daemon sends it. The tester end is
// always libpcap: it injects the fixture frames and captures what comes back.
//   mux      client frames (UDP and TCP, IPv4 and IPv6, an 802.1Q-tagged one, a 1400-byte one, a burst of
//            1000 flows, a frame to another address that the filter must keep out, a bad checksum, an ARP)
//            -> processPacket -> the VXLAN frame out of the same port
//   host-in  VXLAN frames as a MUX sends them (IPv4 and IPv6 inside, a burst) -> processInbound -> the
//            NATed inner frame out of the same port (the daemon sends it to the backend's port)
//   dsr      backend replies -> processOutbound -> the IP packet from the VIP with the io path's raw
//            sender, routed by --via (the daemon routes it by the router's address)
// Prints one JSON line: per part the frames expected (offline), received at the tester, mismatches
// (first 5, decoded), and ok. Exit status 0 only when every part matches exactly, in order.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mac } from '../../shared/addr.js';
import { parseConfig, type SlbxConfig } from '../../shared/config.js';
import { pkt } from '../../shared/packet-builder.js';
import { TCP_SYN, TCP_ACK } from '../../shared/tcp.js';
import { dissect } from '../../shared/dissect.js';
import { LINKTYPE_ETHERNET, LINKTYPE_RAW } from '../../shared/pcap-file.js';
import { compileMuxTables, ALL_HEALTHY } from '../../mux/tables.js';
import { newMuxContext, processPacket, VERDICT_FORWARD, type MuxContext } from '../../mux/data-plane.js';
import { muxCaptureFilter } from '../../mux/daemon.js';
import { compileHostTables } from '../../host-agent/tables.js';
import {
  newHostContext,
  processInbound,
  processOutbound,
  OUT_DSR,
  VERDICT_FORWARD as HOST_FORWARD,
  type HostContext,
} from '../../host-agent/data-plane.js';
import { PcapPort } from '../../runtime/pcap-port.js';
import { createFramePort, createIpSender, isIoPath, resolveIo, type FramePort, type IoPath } from '../../runtime/frame-port.js';
import { readInterface } from '../../runtime/netif.js';

const ROUTER_MAC = '02:00:00:00:00:01';
const HOST1_MAC = '02:00:00:00:00:21';
const CLIENT = '198.51.100.10';
const CLIENT6 = '2001:db8:c::10';
const VIP = '203.0.113.10';
const VIP6 = '2001:db8:ff::10';
const NIC = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10', ip6: '2001:db8:d::10' };
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02'];

function usage(msg: string): never {
  process.stderr.write(`port-check.js: ${msg}\nusage: node dist/scripts/bench/port-check.js --io pcap|ring --dut IF --tester IF\n`);
  process.exit(2);
}

interface PartResult {
  part: string;
  expected: number;
  received: number;
  mismatches: string[];
  ok: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function describe(f: Uint8Array, linkType = LINKTYPE_ETHERNET): string {
  return dissect(f, linkType)
    .layers.map((l) => {
      const { layer, off: _off, ...rest } = l as Record<string, unknown>;
      return `${String(layer)}(${Object.entries(rest)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(' ')})`;
    })
    .join(' / ');
}

/** Captures on the tester until `want` frames arrived or the time is up; returns them in order. */
async function collect(cap: Buffer[], want: number, ms = 4000): Promise<void> {
  const t0 = Date.now();
  let last = -1;
  let stable = 0;
  while (Date.now() - t0 < ms) {
    await sleep(50);
    if (cap.length >= want) {
      await sleep(100);
      return;
    } // and a little more: nothing extra may come
    if (cap.length === last) {
      if (++stable > 20) return;
    } else stable = 0;
    last = cap.length;
  }
}

function compare(part: string, expected: Buffer[], got: Buffer[], linkType = LINKTYPE_ETHERNET): PartResult {
  const mismatches: string[] = [];
  const n = Math.max(expected.length, got.length);
  for (let i = 0; i < n && mismatches.length < 5; i++) {
    const e = expected[i];
    const g = got[i];
    if (e !== undefined && g !== undefined && e.equals(g)) continue;
    mismatches.push(
      `#${i}: expected ${e === undefined ? 'nothing' : describe(e, linkType)}; got ${g === undefined ? 'nothing' : describe(g, linkType)}`,
    );
  }
  return { part, expected: expected.length, received: got.length, mismatches, ok: mismatches.length === 0 };
}

function muxInputs(dutMac: string): Buffer[] {
  const eth = (o: { vlan?: number } = {}) => pkt().eth({ src: ROUTER_MAC, dst: dutMac, ...o });
  const frames: Buffer[] = [
    eth().ipv4({ src: CLIENT, dst: VIP }).udp({ sport: 40000, dport: 7 }).payload('one').build(),
    eth().ipv4({ src: CLIENT, dst: VIP }).tcp({ sport: 40001, dport: 80, flags: TCP_SYN }).build(),
    eth().ipv6({ src: CLIENT6, dst: VIP6 }).udp({ sport: 40002, dport: 7 }).payload('six').build(),
    eth().ipv6({ src: CLIENT6, dst: VIP6 }).tcp({ sport: 40003, dport: 80, flags: TCP_ACK }).build(),
    eth({ vlan: 42 }).ipv4({ src: CLIENT, dst: VIP }).udp({ sport: 40004, dport: 7 }).payload('tagged').build(),
    eth()
      .ipv4({ src: CLIENT, dst: VIP })
      .udp({ sport: 40005, dport: 7 })
      .payload(new Uint8Array(1400 - 42))
      .build(),
    eth().ipv4({ src: CLIENT, dst: '203.0.113.99' }).udp({ sport: 40006, dport: 7 }).payload('not a vip').build(),
    eth().ipv4({ src: CLIENT, dst: VIP }).udp({ sport: 40007, dport: 9999 }).payload('no rule').build(),
  ];
  const bad = eth().ipv4({ src: CLIENT, dst: VIP }).udp({ sport: 40008, dport: 7 }).payload('bad checksum').build();
  bad[24] = bad[24]! ^ 0xff; // IPv4 header checksum
  frames.push(bad);
  for (let k = 0; k < 1000; k++)
    frames.push(
      eth()
        .ipv4({ src: CLIENT, dst: VIP })
        .udp({ sport: 10000 + k, dport: 7 })
        .payload('burst')
        .build(),
    );
  return frames;
}

function hostInputs(dutMac: string): Buffer[] {
  const vx = () =>
    pkt()
      .eth({ src: '02:00:00:00:00:11', dst: dutMac })
      .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
      .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
      .vxlan({ vni: 5001 });
  const frames: Buffer[] = [
    vx()
      .eth({ src: '02:00:00:00:00:11', dst: NIC.mac })
      .ipv4({ src: CLIENT, dst: VIP })
      .tcp({ sport: 40000, dport: 80, flags: TCP_SYN })
      .build(),
    vx()
      .eth({ src: '02:00:00:00:00:11', dst: NIC.mac, type: 0x86dd })
      .ipv6({ src: CLIENT6, dst: VIP6 })
      .udp({ sport: 40001, dport: 7 })
      .payload('six')
      .build(),
    vx()
      .eth({ src: '02:00:00:00:00:11', dst: '02:00:c0:00:02:99' })
      .ipv4({ src: CLIENT, dst: VIP })
      .udp({ sport: 40002, dport: 7 })
      .build(), // unknown nic
  ];
  for (let k = 0; k < 500; k++)
    frames.push(
      vx()
        .eth({ src: '02:00:00:00:00:11', dst: NIC.mac })
        .ipv4({ src: CLIENT, dst: VIP })
        .udp({ sport: 20000 + k, dport: 7 })
        .payload('burst')
        .build(),
    );
  return frames;
}

function dsrInputs(): Buffer[] {
  const back = () => pkt().eth({ src: NIC.mac, dst: PORT_MACS[0] });
  const frames = [
    back()
      .ipv4({ src: NIC.ip, dst: CLIENT })
      .tcp({ sport: 80, dport: 40000, flags: TCP_SYN | TCP_ACK })
      .build(),
    back().ipv4({ src: NIC.ip, dst: CLIENT }).udp({ sport: 7, dport: 40001 }).payload('echo').build(),
  ];
  for (let k = 0; k < 300; k++)
    frames.push(
      back()
        .ipv4({ src: NIC.ip, dst: CLIENT })
        .udp({ sport: 7, dport: 30000 + k })
        .payload('burst')
        .build(),
    );
  return frames;
}

function newMux(config: SlbxConfig, dutMac: string): MuxContext {
  const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
  for (const h of tables.hosts.values()) {
    h.mac.set(mac(HOST1_MAC));
    h.macKnown = true;
  }
  return newMuxContext({
    tables,
    localMac: mac(dutMac),
    localPa4: config.muxes[0]!.address.words[0]!,
    hashSeed: config.hashSeed,
    mtu: config.fabric.mtu,
    vxlanPort: config.fabric.vxlanPort,
    flowTable: config.flowTable,
  });
}

const newHost = (config: SlbxConfig): HostContext =>
  newHostContext(
    compileHostTables(config, 'host1', 1),
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );

async function run(io: IoPath, dutIf: string, testerIf: string, via: string): Promise<PartResult[]> {
  const cfgFile = fileURLToPath(new URL('../../../examples/lab.yaml', import.meta.url));
  const r = parseConfig(readFileSync(cfgFile, 'utf8'), cfgFile);
  if (!r.ok) throw new Error('the lab config does not parse');
  const config = r.config;
  const dutInfo = readInterface(dutIf);
  if (dutInfo === null) throw new Error(`no interface ${dutIf}`);
  const dutMac = [...dutInfo.mac].map((b) => b.toString(16).padStart(2, '0')).join(':');
  const results: PartResult[] = [];
  // libpcap handles are not closed here but kept until the process exits: a closed `cap` handle that
  // the garbage collector frees crashes Node (cap 0.2.1 on Node 20; runtime/pcap-port.ts now keeps
  // closed ones alive, this predates that). Each part has its own tester capture.
  const keep: PcapPort[] = [];
  let tester: PcapPort = new PcapPort(testerIf);
  keep.push(tester);
  let captured: Buffer[] = [];
  const capture = (filter: string) => {
    const mine: Buffer[] = [];
    captured = mine;
    tester = new PcapPort(testerIf);
    keep.push(tester);
    tester.open(
      filter,
      (f, len) => {
        mine.push(Buffer.from(f.subarray(0, len)));
      },
      64 * 1024 * 1024,
    );
  };
  const retire = (p: FramePort) => {
    if (p instanceof PcapPort) keep.push(p);
    else p.close();
  };
  // the fixtures check what is sent, not how fast: bursts of 64 frames, so that no capture ring overflows
  const inject = async (frames: Buffer[]) => {
    for (let i = 0; i < frames.length; i++) {
      tester.send(frames[i]!, 0, frames[i]!.length);
      if (i % 64 === 63) await sleep(5);
    }
  };

  // ---- mux
  {
    const inputs = muxInputs(dutMac);
    const offline = newMux(config, dutMac);
    const expected: Buffer[] = [];
    for (const f of inputs)
      if (processPacket(Buffer.from(f), f.length, offline) === VERDICT_FORWARD)
        expected.push(Buffer.from(offline.out.subarray(0, offline.outLen)));
    const ctx = newMux(config, dutMac);
    const dut: FramePort = createFramePort(io, dutIf);
    dut.open(
      muxCaptureFilter(config),
      (f, len) => {
        if (processPacket(f, len, ctx) === VERDICT_FORWARD) dut.send(ctx.out, 0, ctx.outLen);
      },
      64 * 1024 * 1024,
    );
    capture('udp dst port 4789');
    await sleep(100);
    await inject(inputs);
    await collect(captured, expected.length);
    results.push(compare('mux', expected, captured));
    retire(dut);
  }
  // ---- host agent inbound
  {
    const inputs = hostInputs(dutMac);
    const offline = newHost(config);
    const expected: Buffer[] = [];
    for (const f of inputs) {
      const w = Buffer.from(f);
      if (processInbound(w, w.length, offline) === HOST_FORWARD)
        expected.push(Buffer.from(offline.outBuf.subarray(offline.outOff, offline.outOff + offline.outLen)));
    }
    const ctx = newHost(config);
    const dut = createFramePort(io, dutIf);
    dut.open(
      'udp dst port 4789 and dst host 198.18.0.21',
      (f, len) => {
        if (processInbound(f, len, ctx) === HOST_FORWARD) dut.send(f, ctx.outOff, ctx.outLen);
      },
      64 * 1024 * 1024,
    );
    capture(`ether dst ${NIC.mac}`);
    await sleep(100);
    await inject(inputs);
    await collect(captured, expected.length);
    results.push(compare('host-in', expected, captured));
    retire(dut);
  }
  // ---- DSR return: the data plane on the backend's frames, the packets out of the io path's raw sender
  {
    const inputs = dsrInputs();
    const offline = newHost(config);
    const expected: Buffer[] = [];
    for (const f of inputs) {
      const w = Buffer.from(f);
      if (processOutbound(w, w.length, 0, offline) === HOST_FORWARD && offline.outPort === OUT_DSR)
        expected.push(Buffer.from(offline.outBuf.subarray(offline.outOff, offline.outOff + offline.outLen)));
    }
    const ctx = newHost(config);
    const sender = createIpSender(io, 4, via);
    capture(`src host ${VIP}`);
    await sleep(100);
    // as in the daemon's port handler: the data plane, then the DSR send (queued on the ring path until
    // flush(), which a batch's end does in the daemon)
    for (const f of inputs) {
      const w = Buffer.from(f);
      if (processOutbound(w, w.length, 0, ctx) === HOST_FORWARD && ctx.outPort === OUT_DSR) sender.send(w, ctx.outOff, ctx.outLen);
    }
    (sender as { flush?: () => void }).flush?.();
    await collect(captured, expected.length);
    // the tester captured Ethernet frames: compare from the IP header on
    results.push(
      compare(
        'dsr',
        expected,
        captured.map((c) => c.subarray(14)),
        LINKTYPE_RAW,
      ),
    );
    sender.close();
  }
  return results;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const o = new Map<string, string>();
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i]!;
    if (!['--io', '--dut', '--tester', '--via'].includes(k) || argv[i + 1] === undefined) usage(`bad argument ${JSON.stringify(k)}`);
    o.set(k.slice(2), argv[i + 1]!);
  }
  const io = o.get('io') ?? usage('--io is required');
  if (!isIoPath(io)) usage(`--io must be pcap or ring (got ${io})`);
  const resolved = resolveIo(io);
  if (resolved.io !== io) {
    process.stdout.write(`${JSON.stringify({ io, ok: false, error: `ring unavailable: ${resolved.fallbackReason}` })}\n`);
    process.exit(1);
  }
  const results = await run(
    io,
    o.get('dut') ?? usage('--dut is required'),
    o.get('tester') ?? usage('--tester is required'),
    o.get('via') ?? '198.18.0.2',
  );
  const ok = results.every((r) => r.ok);
  process.stdout.write(`${JSON.stringify({ io, ok, results })}\n`);
  process.exit(ok ? 0 : 1);
}

void main();
