// VXLAN received on a UDP socket bound to the provider address and the VXLAN port (`node:dgram`), handed
// to the host agent's unchanged data plane as a whole frame: each datagram is copied after a synthesized
// outer Ethernet / IPv4 / UDP header in one reused buffer. The datagram's source address and port become
// the outer source, so processInbound's trusted-source check still decides; the outer IPv4 header gets
// a valid checksum (processInbound verifies it) and the lengths of the datagram.
//
// What this path costs and changes, compared with the capture (docs/io-paths.md):
// - dgram allocates per datagram: a Buffer for the payload and an `rinfo` object with the source address
//   as a string. The string is mapped to a number through a map of the config's MUX and host PAs built
//   once; any other source maps to 0.0.0.0, which processInbound drops as `unknown_source`.
// - the kernel has already checked the outer UDP checksum (if not zero) and reassembled outer fragments,
//   so processInbound's `outer_fragment` drop cannot happen on this path.
// - the socket consumes the datagrams: the kernel sends no ICMP port unreachable, no nftables rule needed.
import { createSocket, type Socket } from 'node:dgram';
import { writeEthernetRaw, ETHERTYPE_IPV4 } from '../shared/ethernet.js';
import { IPPROTO_UDP, IPV4_HEADER_LEN, newIpv4Header, writeIpv4 } from '../shared/ipv4.js';
import { UDP_HEADER_LEN, newUdpHeader, writeUdp } from '../shared/udp.js';
import type { FrameHandler } from './pcap-port.js';

/** Ethernet + IPv4 + UDP in front of the VXLAN header. */
export const VXLAN_CARRIER_LEN = 14 + IPV4_HEADER_LEN + UDP_HEADER_LEN;
const MAX_DATAGRAM = 65535;
const ZERO_MAC = new Uint8Array(6);

/**
 * Writes Ethernet (to `mac`) / IPv4 (src -> dst, UDP, TTL 64, checksum) / UDP (srcPort -> dstPort, checksum
 * zero) for a payload of `payloadLen` bytes at buf[VXLAN_CARRIER_LEN]. Returns VXLAN_CARRIER_LEN.
 */
export function writeVxlanCarrier(
  buf: Uint8Array,
  mac: Uint8Array,
  src: number,
  srcPort: number,
  dst: number,
  dstPort: number,
  payloadLen: number,
  ip = newIpv4Header(),
  udp = newUdpHeader(),
): number {
  writeEthernetRaw(mac, ZERO_MAC, ETHERTYPE_IPV4, buf, 0);
  ip.totalLength = IPV4_HEADER_LEN + UDP_HEADER_LEN + payloadLen;
  ip.ttl = 64;
  ip.protocol = IPPROTO_UDP;
  ip.src = src;
  ip.dst = dst;
  writeIpv4(ip, buf, 14);
  udp.srcPort = srcPort;
  udp.dstPort = dstPort;
  udp.length = UDP_HEADER_LEN + payloadLen;
  udp.checksum = 0;
  writeUdp(udp, buf, 14 + IPV4_HEADER_LEN);
  return VXLAN_CARRIER_LEN;
}

export interface VxlanSocketOptions {
  /** Provider address to bind, text and number. */
  pa: string;
  pa4: number;
  port: number;
  /** MAC written as the synthesized frame's destination (the fabric interface's). */
  mac: Uint8Array;
  /** Source address text -> number, for the addresses the data plane may trust. */
  sources: ReadonlyMap<string, number>;
  /** SO_RCVBUF in bytes (the kernel caps it at net.core.rmem_max), or 0 to leave the default. */
  receiveBufferBytes?: number;
}

export class VxlanSocket {
  readonly frame: Buffer = Buffer.alloc(VXLAN_CARRIER_LEN + MAX_DATAGRAM);
  bound = false;
  received = 0;
  errors = 0;
  lastError = '';
  private sock: Socket | null = null;
  private sources: ReadonlyMap<string, number>;
  private readonly o: VxlanSocketOptions;
  private readonly ip = newIpv4Header();
  private readonly udp = newUdpHeader();

  constructor(o: VxlanSocketOptions) {
    this.o = o;
    this.sources = o.sources;
  }

  /** The trusted sources changed (a new config). */
  setSources(sources: ReadonlyMap<string, number>): void {
    this.sources = sources;
  }

  /** Binds; `onReady` is called once, with null or the bind error (EADDRINUSE, EADDRNOTAVAIL, ...). */
  open(onFrame: FrameHandler, onReady: (error: Error | null) => void, onError: (error: Error) => void): void {
    this.close();
    const o = this.o;
    const sock = createSocket({ type: 'udp4', ...(o.receiveBufferBytes ? { recvBufferSize: o.receiveBufferBytes } : {}) });
    this.sock = sock;
    let ready = false;
    sock.on('error', (e: Error) => {
      this.errors++;
      this.lastError = e.message;
      if (!ready) {
        ready = true;
        this.bound = false;
        onReady(e);
      } else onError(e);
    });
    const frame = this.frame;
    sock.on('message', (msg: Buffer, rinfo: { address: string; port: number }) => {
      this.received++;
      const n = msg.length;
      writeVxlanCarrier(frame, o.mac, this.sources.get(rinfo.address) ?? 0, rinfo.port, o.pa4, o.port, n, this.ip, this.udp);
      msg.copy(frame, VXLAN_CARRIER_LEN, 0, n);
      onFrame(frame, VXLAN_CARRIER_LEN + n, false);
    });
    sock.bind({ address: o.pa, port: o.port, exclusive: true }, () => {
      if (ready) return;
      ready = true;
      this.bound = true;
      onReady(null);
    });
  }

  get isOpen(): boolean {
    return this.bound;
  }

  close(): void {
    if (this.sock !== null) {
      try {
        this.sock.close();
      } catch {
        /* already closed */
      }
      this.sock = null;
    }
    this.bound = false;
  }
}
