// Which implementation captures and injects frames (`--io pcap|ring`), behind one interface so the
// daemons and their data planes are the same on both:
//   pcap  libpcap through `cap` (runtime/pcap-port.ts) and `raw-socket` (runtime/raw-sender.ts): one
//         call into JavaScript and one send(2) per packet; portable, the default
//   ring  slbx's own addon (runtime/ring-port.ts, native/slbx_ring.c): a packet socket with a receive
//         ring, one call into JavaScript per batch of frames and one sendmmsg(2) per batch of sends
// `ring` is optional: when the addon is not built or cannot load, resolveIo() falls back to pcap and
// says why (the daemons log it once). Measurements: docs/performance.md.
import { PcapPort } from './pcap-port.js';
import { RawSender } from './raw-sender.js';
import { loadRingAddon, RingPort, RingRawSender } from './ring-port.js';

export const IO_PATHS = ['pcap', 'ring'] as const;
export type IoPath = (typeof IO_PATHS)[number];
export const DEFAULT_IO_PATH: IoPath = 'pcap';

export function isIoPath(text: string): text is IoPath {
  return (IO_PATHS as readonly string[]).includes(text);
}

/** What the daemons need of a capture port: PcapPort's interface. */
export interface FramePort {
  readonly iface: string;
  open(filter: string, onFrame: (frame: Buffer, len: number, truncated: boolean) => void, bufferBytes?: number): void;
  /**
   * Sends the frame buf[off .. off + len): a frame inside a larger buffer (the host agent delivers the
   * inner frame of a VXLAN packet where it lies) goes without a view made per frame.
   * false: not sent, the caller counts it (send_error_<what>); the port counts it too (sendErrors).
   * true: sent, or with txDeferred queued for a batch the kernel may still refuse (deferredSendErrors).
   * counted: a frame the caller counts as sent; with txDeferred it is counted by sentCounted() once the
   * kernel took it, not by the caller when send() returns.
   */
  send(buf: Uint8Array, off: number, len: number, counted?: boolean): boolean;
  /** true on the ring path: send() queues, the kernel takes or refuses the frame when its batch goes out. */
  readonly txDeferred: boolean;
  /**
   * With txDeferred: frames sent with `counted` that the kernel took (out[0]) and their bytes (out[1]),
   * since the port was made; otherwise both 0. Not per packet: on a timer and before /counters answers.
   */
  sentCounted(out: Float64Array): void;
  readonly isOpen: boolean;
  close(): void;
  readonly sendErrors: number;
  readonly lastSendError: string;
  /**
   * Frames send() accepted that the kernel refused later (the ring path's batched sendmmsg), since the
   * port was made. Not per packet: the daemons read it on a timer and before answering /counters.
   */
  deferredSendErrors(): number;
}

/** What the host agent needs of its DSR sender: RawSender's send(). */
export interface IpSender {
  send(buf: Buffer, off: number, len: number): boolean;
  readonly sent: number;
  readonly sendErrors: number;
  readonly lastSendError: string;
  /** As FramePort's. */
  deferredSendErrors(): number;
  close(): void;
}

/** The path that will be used for `requested`, and why it differs when it does. */
export function resolveIo(requested: IoPath): { io: IoPath; fallbackReason: string | null } {
  if (requested === 'pcap') return { io: 'pcap', fallbackReason: null };
  const r = loadRingAddon();
  return 'error' in r ? { io: 'pcap', fallbackReason: r.error } : { io: 'ring', fallbackReason: null };
}

/** A capture port on `iface` for an io path already resolved by resolveIo(). */
export function createFramePort(io: IoPath, iface: string): FramePort {
  if (io === 'ring') {
    const r = loadRingAddon();
    if ('addon' in r) return new RingPort(iface, r.addon);
  }
  return new PcapPort(iface);
}

/** A sender of whole IP packets routed by `via`, for an io path already resolved by resolveIo(). */
export function createIpSender(io: IoPath, family: 4 | 6, via: string): IpSender {
  if (io === 'ring') {
    const r = loadRingAddon();
    if ('addon' in r) return new RingRawSender(r.addon, family, via);
  }
  return new RawSender(family, via);
}
