#!/usr/bin/env node
// slbx-mux: the MUX daemon. See --help.
import { one } from '../shared/args.js';
import { isMain } from '../runtime/command.js';
import { readPolicyKey } from '../runtime/redirect-mac.js';
import { exitWith, runDaemon, type DaemonProgram } from '../runtime/daemon-main.js';
import { checkPacketDaemonArgs, packetDaemonOptions, resolvePacketDaemonArgs } from '../runtime/packet-options.js';
import { DEFAULT_SEND_PATH, isSendPath, MuxDaemon, muxWorkersRefusal, SEND_PATHS, type SendPath } from './daemon.js';
import type { IoPath } from '../runtime/frame-port.js';
import { writeMuxMetrics } from './metrics.js';

const PACKET = packetDaemonOptions('mux');
const MAX_WORKERS = 16;

export const MUX_PROGRAM: DaemonProgram = {
  program: 'slbx-mux',
  usage: 'slbx-mux --config FILE --name NAME [options]',
  about:
    "The slbx MUX. Captures the packets sent to the config's VIPs on its fabric interface (the kernel of\n" +
    'its namespace neither owns the VIPs nor forwards, so it drops them silently), picks a backend per\n' +
    "flow (flow table, then the rule's Maglev table) and sends each packet VXLAN-encapsulated to the\n" +
    "backend's host. Logs are JSON lines on stdout, state changes only.\n\n" +
    'Send paths (--send-path; measurements and the choice: docs/io-paths.md):\n' +
    '  cap  the whole frame, injected on the capture handle (libpcap); the outer UDP source port is the\n' +
    "       flow's (RFC 7348 5), Ethernet to the MAC the MUX learned by ARP\n" +
    "  raw  outer IPv4 onwards on an IPPROTO_RAW socket; the kernel routes by the host's PA and does ARP\n" +
    '  udp  VXLAN header onwards on a connected UDP socket per host; the kernel writes IPv4/UDP, so every\n' +
    "       flow to one host has the same outer source port (the socket's): no per-flow fabric entropy",
  options: [
    PACKET.interface,
    PACKET.captureBufferMb,
    { name: 'send-path', value: 'PATH', help: 'how VXLAN leaves: cap, raw or udp (see above)', default: DEFAULT_SEND_PATH },
    PACKET.io,
    {
      name: 'workers',
      value: 'N',
      default: '1',
      help: `data-plane threads, 1..${MAX_WORKERS}: N >= 2 needs --io ring (the kernel spreads flows over N sockets by PACKET_FANOUT; docs/io-paths.md)`,
    },
    { name: 'no-bgp', help: 'speak no BGP even when the config has a bgp section (benchmarks, tests); docs/bgp.md' },
  ],
  defaultStatus: '127.0.0.1:9180',
  extraHelp:
    'status: curl -s http://127.0.0.1:9180/status     ready, tables, hosts, flow count, counters\n' +
    '        curl -s http://127.0.0.1:9180/counters   every counter; drops are drop_<reason>\n' +
    '        curl -s http://127.0.0.1:9180/metrics    the Prometheus text format (docs/metrics.md)\n' +
    "        curl -s 'http://127.0.0.1:9180/flows?limit=20'",
  checkArgs(args) {
    const sp = one(args, 'send-path')!;
    const ioError = checkPacketDaemonArgs(args);
    if (ioError !== null) return ioError;
    const workers = Number(one(args, 'workers'));
    if (!Number.isInteger(workers) || workers < 1 || workers > MAX_WORKERS)
      return `--workers must be an integer 1..${MAX_WORKERS} (got ${JSON.stringify(one(args, 'workers'))})`;
    if (isSendPath(sp)) {
      const refusal = muxWorkersRefusal(workers, one(args, 'io') as IoPath, sp);
      if (refusal !== null) return refusal;
    }
    return isSendPath(sp) ? null : `--send-path must be one of ${SEND_PATHS.join(', ')} (got ${JSON.stringify(sp)})`;
  },
  create(args, config, name, cfgPath) {
    const sendPath = one(args, 'send-path') as SendPath; // checked by checkArgs
    const me = config.muxes.find((m) => m.name === name);
    if (me === undefined)
      return `no mux named ${JSON.stringify(name)} in ${cfgPath} (muxes: ${config.muxes.map((m) => m.name).join(', ')})`;
    const packet = resolvePacketDaemonArgs(args, me.address.text, name, cfgPath);
    if (typeof packet === 'string') return packet;
    // Fastpath redirects are signed with the policy key (docs/east-west.md)
    const policyKey = readPolicyKey(one(args, 'controller-token-file'));
    if (policyKey !== null && typeof policyKey === 'object') return policyKey.error;
    // with a controller, a bootstrap --config knows no health: BGP waits for the first policy (docs/bgp.md)
    const awaitPolicy = one(args, 'controller') !== undefined && one(args, 'config') !== undefined;
    return new MuxDaemon({
      config,
      name,
      policyKey,
      iface: packet.iface,
      mac: packet.mac,
      captureBufferBytes: packet.captureBufferBytes,
      sendPath,
      io: packet.io,
      bgp: !args.flags.has('no-bgp'),
      awaitPolicy,
      workers: Number(one(args, 'workers')),
    });
  },
  routes(daemon) {
    const d = daemon as MuxDaemon;
    return (path, q) => {
      if (path === '/status') return d.status();
      if (path === '/counters') return d.counters();
      if (path === '/metrics') return writeMuxMetrics(d);
      if (path === '/flows') return d.flows(Math.min(10000, Number(q.get('limit') ?? 100) || 100));
      return undefined;
    };
  },
  // --controller: each policy carries the health the host agents reported; a policy that changes
  // neither the config nor what is down nor the outbound NAT ranges (the same state again) leaves the
  // tables and their generation be.
  // Every policy, changed or not, tells the daemon that the controller's policy is in force (the first
  // one lets BGP announce: MuxDaemonOptions.awaitPolicy)
  applyPolicy(daemon, policy) {
    const d = daemon as MuxDaemon;
    if (policy.configChanged || policy.healthChanged || policy.snatChanged) d.applyConfig(policy.config, policy.healthView, policy.snat);
    d.policyApplied();
  },
};

if (isMain(import.meta.url)) exitWith(runDaemon(MUX_PROGRAM, process.argv.slice(2)));
