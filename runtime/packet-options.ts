// The options of the two packet daemons (slbx-mux, slbx-host-agent), defined once: --interface,
// --capture-buffer-mb and --io, their checks and what they resolve to in the daemon's namespace.
import { one, type OptionSpec, type ParsedArgs } from '../shared/args.js';
import { DEFAULT_IO_PATH, IO_PATHS, isIoPath, type IoPath } from './frame-port.js';
import { findInterfaceByAddress, readInterface } from './netif.js';

export type PacketDaemonRole = 'mux' | 'host';

export interface PacketDaemonOptions {
  readonly interface: OptionSpec;
  readonly captureBufferMb: OptionSpec;
  readonly io: OptionSpec;
}

const CAPTURE_BUFFER_MB_MAX = 1024;

/** The three specs; the help texts say what the option means to that daemon. */
export function packetDaemonOptions(role: PacketDaemonRole): PacketDaemonOptions {
  return {
    interface: {
      name: 'interface',
      value: 'IF',
      help: `fabric interface; default: the interface that holds the ${role}'s provider address`,
    },
    captureBufferMb: {
      name: 'capture-buffer-mb',
      value: 'N',
      default: '32',
      help:
        role === 'mux'
          ? `kernel capture buffer, 1..${CAPTURE_BUFFER_MB_MAX}`
          : `kernel buffer of the fabric capture (or the udp socket's, capped by net.core.rmem_max), 1..${CAPTURE_BUFFER_MB_MAX}`,
    },
    io: {
      name: 'io',
      value: 'IO',
      default: DEFAULT_IO_PATH,
      help:
        role === 'mux'
          ? "capture and injection: pcap (libpcap) or ring (slbx's batched packet-socket addon, falls back to pcap when not built; docs/performance.md)"
          : "capture, injection and DSR sends: pcap (libpcap, raw-socket) or ring (slbx's batched addon, falls back to pcap when not built; docs/performance.md)",
    },
  };
}

/** The check that needs neither the config nor the namespace (--io); an error message or null. */
export function checkPacketDaemonArgs(args: ParsedArgs): string | null {
  const io = one(args, 'io')!;
  return isIoPath(io) ? null : `--io must be one of ${IO_PATHS.join(', ')} (got ${JSON.stringify(io)})`;
}

export interface PacketDaemonSetup {
  iface: string;
  mac: Uint8Array;
  captureBufferBytes: number;
  io: IoPath;
}

/**
 * The fabric interface (--interface, or the one that holds `address`, the node's provider address), the
 * capture buffer and the I/O path; a string is the message to refuse with. `name` and `cfgPath` name
 * the node and where its address came from in that message.
 */
export function resolvePacketDaemonArgs(args: ParsedArgs, address: string, name: string, cfgPath: string): PacketDaemonSetup | string {
  const bufMb = Number(one(args, 'capture-buffer-mb'));
  if (!Number.isInteger(bufMb) || bufMb < 1 || bufMb > CAPTURE_BUFFER_MB_MAX)
    return `--capture-buffer-mb must be an integer 1..${CAPTURE_BUFFER_MB_MAX}`;
  const ifName = one(args, 'interface');
  const iface = ifName !== undefined ? readInterface(ifName) : findInterfaceByAddress(address);
  if (iface === null) {
    return ifName !== undefined
      ? `no interface ${ifName} in this network namespace`
      : `no interface holds ${address} (the address of ${name} in ${cfgPath}); add it to the fabric interface or give --interface`;
  }
  return { iface: iface.name, mac: iface.mac, captureBufferBytes: bufMb * 1024 * 1024, io: one(args, 'io') as IoPath };
}
