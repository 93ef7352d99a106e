// The daemons' send errors, counted on real sockets that really fail. Run as root in a network
// namespace of its own, which it fills itself (test/send-errors.test.ts runs it under `unshare --net`,
// so the namespace disappears with the process; --mount and a fresh sysfs so /sys/class/net is ours):
//
//   unshare --net --mount sh -c 'mount -t sysfs sysfs /sys && exec node dist/scripts/bench/send-fail-check.js [--io pcap|ring]'
//
// It makes veth pairs for a MUX (mux1 of examples/lab.yaml, 198.18.0.11 on `dut`) and a host agent
// (host1, 198.18.0.21 on `hfab`, its ports h1vm1 and h1vm2), starts the real daemon objects on them,
// teaches the MUX its hosts' MACs with ARP replies, then makes the kernel refuse their sends, without
// taking a captured interface down (libpcap's poll then fails, and the `cap` addon aborts the process):
//   - a frame longer than the interface's MTU on a packet socket: EMSGSIZE (the `cap` send path, with
//     --io ring at the batch's sendmmsg; the host agent's ICMP error back out a port of MTU 68);
//   - a raw or UDP socket whose route is gone: ENETUNREACH (the `raw` and `udp` send paths; the host
//     agent's DSR over IPv4), and over IPv6 the host agent has no DSR socket at all (no --dsr-via6).
// For each MUX send path it runs client frames through the MUX with the fault, then without it. Prints
// one JSON line: per case the counters before, with the fault and after it, and the frames sent. The
// verdicts are the test's; this only drives the daemons and reports.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { formatMac } from '../../shared/addr.js';
import { parseConfig, formatConfigErrors } from '../../shared/config.js';
import { pkt } from '../../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../../shared/tcp.js';
import { IPV4_FLAG_DF } from '../../shared/ipv4.js';
import { MuxDaemon, type SendPath } from '../../mux/daemon.js';
import { HostDaemon } from '../../host-agent/daemon.js';
import { learnReplyFlow } from '../../host-agent/dsr-flows.js';
import { isIoPath } from '../../runtime/frame-port.js';
import { readInterface } from '../../runtime/netif.js';
import { configureLog } from '../../runtime/log.js';

const LAB_YAML = fileURLToPath(new URL('../../../examples/lab.yaml', import.meta.url));
const ROUTER_MAC = '02:00:00:00:00:01';
const FRAMES = 20;

const ip = (...a: string[]) => execFileSync('ip', a, { stdio: 'pipe' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sends = (c: Record<string, number>) =>
  Object.fromEntries(
    Object.entries(c).filter(([k]) => k.startsWith('send_error_') || k.startsWith('tx_') || k === 'out_dsr' || k === 'icmp_too_big_sent'),
  );

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help')) {
    process.stdout.write(
      "send-fail-check.js [--io pcap|ring]: the daemons' send errors on real sockets made to fail; run as root in a network\n" +
        'namespace of its own (see the top of scripts/bench/send-fail-check.ts; test/send-errors.test.ts runs it). Prints one JSON line.\n',
    );
    return;
  }
  const i = argv.indexOf('--io');
  const io = i < 0 ? 'pcap' : (argv[i + 1] ?? '');
  if (!isIoPath(io) || argv.length !== (i < 0 ? 0 : 2))
    throw new Error(`usage: send-fail-check.js [--io pcap|ring] (got ${argv.join(' ')})`);
  configureLog('send-fail-check', 'error');
  const parsed = parseConfig(readFileSync(LAB_YAML, 'utf8'), LAB_YAML);
  if (!parsed.ok) throw new Error(formatConfigErrors(parsed.errors, LAB_YAML));
  const config = parsed.config;
  ip('link', 'set', 'lo', 'up');
  ip('link', 'add', 'dut', 'mtu', '1600', 'type', 'veth', 'peer', 'name', 'tester', 'mtu', '1600');
  ip('addr', 'add', '198.18.0.11/24', 'dev', 'dut');
  ip('link', 'set', 'tester', 'up');
  ip('link', 'set', 'dut', 'up');
  const dut = readInterface('dut')!;
  const out: Record<string, unknown> = { io };

  // ---- the MUX, each send path: client frames the kernel refuses (a frame too long for `dut` on the cap
  // path, no route to the hosts on the raw and udp paths), then the same without the fault
  const client = (i: number, payload: number) =>
    pkt()
      .eth({ src: ROUTER_MAC, dst: formatMac(dut.mac) })
      .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' })
      .tcp({ sport: 40000 + i, dport: 80, flags: TCP_SYN })
      .payload(payload)
      .build();
  for (const sendPath of ['cap', 'raw', 'udp'] as SendPath[]) {
    const d = new MuxDaemon({ config, name: 'mux1', iface: 'dut', mac: dut.mac, sendPath, bgp: false, io });
    d.start();
    // the hosts' MACs, as their ARP replies would teach them
    for (const [pa, hmac] of [
      ['198.18.0.21', '02:00:00:00:00:21'],
      ['198.18.0.22', '02:00:00:00:00:22'],
    ] as const) {
      const f = pkt()
        .eth({ src: hmac, dst: formatMac(dut.mac) })
        .arp({ op: 2, senderMac: hmac, senderIp: pa, targetMac: formatMac(dut.mac), targetIp: '198.18.0.11' })
        .build();
      d.onFrame(f, f.length);
    }
    if (sendPath === 'udp') await sleep(200); // the sockets connect (asynchronously)
    const big = sendPath === 'cap' ? 1400 : 0;
    if (sendPath === 'cap') ip('link', 'set', 'dut', 'mtu', '1400');
    else ip('route', 'del', '198.18.0.0/24', 'dev', 'dut');
    const before = sends(d.counters());
    for (let i = 0; i < FRAMES; i++) {
      const f = client(i, big);
      d.onFrame(f, f.length);
    }
    await sleep(300); // callbacks of asynchronous sends (udp), the ring's batch counters
    const fault = sends(d.counters());
    if (sendPath === 'cap') ip('link', 'set', 'dut', 'mtu', '1600');
    else ip('route', 'add', '198.18.0.0/24', 'dev', 'dut', 'src', '198.18.0.11');
    for (let i = 0; i < FRAMES; i++) {
      const f = client(100 + i, 0);
      d.onFrame(f, f.length);
    }
    await sleep(300);
    const after = sends(d.counters());
    out[`mux-${sendPath}`] = { frames: FRAMES, before, fault, after, send: (d.status() as { send: unknown }).send };
    d.stop();
  }

  // ---- the host agent: DSR with its route gone, DSR of a family without a socket, an ICMP error back
  // out a port whose MTU is too small for it
  ip('link', 'del', 'dut'); // its route to 198.18.0.0/24 would carry the DSR
  ip('link', 'add', 'hfab', 'mtu', '1500', 'type', 'veth', 'peer', 'name', 'hpeer');
  ip('addr', 'add', '198.18.0.21/24', 'dev', 'hfab');
  ip('link', 'set', 'hpeer', 'up');
  ip('link', 'set', 'hfab', 'up');
  for (const n of ['h1vm1', 'h1vm2']) {
    ip('link', 'add', n, 'type', 'veth', 'peer', 'name', `${n}-vm`);
    ip('link', 'set', `${n}-vm`, 'up');
    ip('link', 'set', n, 'up');
  }
  const h = new HostDaemon({
    config,
    name: 'host1',
    iface: 'hfab',
    dsrVia4: '198.18.0.1',
    dsrVia6: null,
    nftables: false,
    io,
    mac: readInterface('hfab')!.mac,
  });
  h.start();
  const port0 = formatMac(readInterface('h1vm1')!.mac);
  const vm = '02:00:c0:00:02:0a';
  const reply4 = (i: number, payload: number) =>
    pkt()
      .eth({ src: vm, dst: port0 })
      .ipv4({ src: '192.0.2.10', dst: '198.51.100.10', flags: IPV4_FLAG_DF })
      .tcp({ sport: 80, dport: 40000 + i, flags: TCP_ACK })
      .payload(payload)
      .build();
  const reply6 = (i: number) =>
    pkt()
      .eth({ src: vm, dst: port0 })
      .ipv6({ src: '2001:db8:d::10', dst: '2001:db8:c::10' })
      .tcp({ sport: 80, dport: 40000 + i, flags: TCP_ACK })
      .build();
  await sleep(200); // the ports' captures are open
  const hBefore = sends(h.counters());
  ip('route', 'del', '198.18.0.0/24', 'dev', 'hfab');
  ip('link', 'set', 'h1vm1', 'mtu', '68');
  for (let i = 0; i < FRAMES; i++) {
    const f = reply4(i, 0);
    learnReplyFlow(f, f.length, 0, h.ctx); // the replies of recorded flows (host-agent/dsr-flows.ts)
    h.onPortFrame(f, f.length, 0);
  }
  for (let i = 0; i < FRAMES; i++) {
    const f = reply6(i);
    learnReplyFlow(f, f.length, 0, h.ctx); // the replies of recorded flows (host-agent/dsr-flows.ts)
    h.onPortFrame(f, f.length, 0);
  }
  for (let i = 0; i < FRAMES; i++) {
    const f = reply4(i, 1600);
    learnReplyFlow(f, f.length, 0, h.ctx); // the replies of recorded flows (host-agent/dsr-flows.ts)
    h.onPortFrame(f, f.length, 0);
  }
  await sleep(300);
  out['host'] = { frames: FRAMES, before: hBefore, fault: sends(h.counters()), dsr: (h.status() as { dsr: unknown }).dsr };
  h.stop();
  process.stdout.write(`${JSON.stringify(out)}\n`);
}
main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`send-fail-check: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  },
);
