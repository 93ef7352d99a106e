// The batched fast path of frame capture and injection (`--io ring`): slbx's own small N-API addon
// (native/slbx_ring.c), an AF_PACKET socket with a libpcap-compiled BPF filter and a memory-mapped
// TPACKET_V2 receive ring. Each wake-up of the event loop hands every ready frame (up to `batch`) to
// JavaScript in ONE call, copied into fixed slots of one shared buffer; frames sent while a batch is
// handled leave in one sendmmsg(2) per socket when the batch ends. The interface is PcapPort's, so the
// daemons and their data planes are unchanged: onFrame(frame, len, truncated) per frame, synchronous,
// and send(buf, len) copies the frame (the caller's buffer is free again at once).
//
// Differences from the pcap path, all deliberate and invisible to the daemons' filters:
//   - frames the interface sends are not captured (PACKET_IGNORE_OUTGOING): the daemons' filters only
//     ever match frames received;
//   - a frame longer than the slot (the interface's MTU + 18, at least 2048 bytes) arrives truncated,
//     flagged as such; libpcap's slot is 64 KB only when the interface has offloads on;
//   - a frame sent inside a batch reaches the kernel when the batch ends (microseconds later), and a
//     send the kernel refuses is counted then (sendErrors), not returned by send(); so a frame the
//     caller counts as sent is sent with `counted` and counted from the batch's result (sentCounted).
// The addon is optional: loadRingAddon() says why it is unavailable, and runtime/frame-port.ts falls
// back to PcapPort with that reason logged.
import { readFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What native/slbx_ring.c exports. */
export interface RingAddon {
  openPacket(
    iface: string,
    filter: string,
    ringBytes: number,
    frameBytes: number,
    batch: number,
    txSlots: number,
    ignoreOutgoing: boolean,
    rx: Buffer,
    meta: Uint32Array,
    onBatch: (n: number) => void,
    spinUs?: number,
    fanoutGroup?: number,
    qdiscBypass?: boolean,
    fanoutProgram?: Uint8Array | null,
  ): object;
  openRaw(family: 4 | 6, via: string, txSlots: number, slotBytes: number): object;
  /**
   * 0 queued (or sent), a negative errno when refused at once. counted: once the kernel takes the frame
   * (at its batch's sendmmsg) it counts in txCountedPackets and txCountedBytes.
   */
  send(h: object, buf: Uint8Array, off: number, len: number, counted?: boolean): number;
  flush(h: object): void;
  stats(h: object): RingStats;
  close(h: object): void;
  burst(h: object, template: Uint8Array, len: number, count: number, seq: number, ipOff: number, ports: number, srcBase: number): number;
}

export interface RingStats {
  rxPackets: number;
  rxBatches: number;
  rxMaxBatch: number;
  /** Times the spin after a drained ring (spinUs) found another frame instead of sleeping. */
  rxSpinHits: number;
  rxTruncated: number;
  rxVlan: number;
  /** From PACKET_STATISTICS: frames the filter passed, and those lost because the ring was full. */
  rxKernelPackets: number;
  rxKernelDrops: number;
  txPackets: number;
  txBatches: number;
  txErrors: number;
  /** Frames sent with `counted` that the kernel took, and their bytes (the caller's tx_packets, tx_bytes). */
  txCountedPackets: number;
  txCountedBytes: number;
  txOversize: number;
  txQueued: number;
  ringFrames: number;
  ringBytes: number;
  txLastError: string | null;
  /**
   * Socket errors (POLLERR: ENETDOWN when the interface went down or away), each cleared with the poll
   * started again so that the port receives once the interface is back; and failed restarts of the poll.
   */
  rxErrors: number;
  rxLastError: string | null;
}

export const RING_ADDON_FILE = 'native/build/Release/slbx_ring.node';
/** Frames handed to JavaScript per call, at most. */
export const DEFAULT_RING_BATCH = 256;
/** Frames queued per socket before a send batch goes out early. */
export const DEFAULT_TX_SLOTS = 256;
const MIN_FRAME_BYTES = 2048;
const FLAG_TRUNCATED = 1;

let cached: { addon: RingAddon } | { error: string } | null = null;

function candidates(): string[] {
  const here = dirname(fileURLToPath(import.meta.url));
  const env = process.env.SLBX_RING_ADDON;
  // runtime/ring-port.ts (tests) and dist/runtime/ring-port.js (daemons)
  const list = [join(here, '..', RING_ADDON_FILE), join(here, '..', '..', RING_ADDON_FILE)];
  return env !== undefined && env !== '' ? [env] : list;
}

/** Loads the addon once; the error says why it is not there (not built, other platform, bad build). */
export function loadRingAddon(): { addon: RingAddon } | { error: string } {
  if (cached !== null) return cached;
  if (process.platform !== 'linux') return (cached = { error: `the ring addon is Linux only (this is ${process.platform})` });
  const files = candidates();
  const file = files.find((f) => existsSync(f));
  if (file === undefined) {
    return (cached = { error: `${files[files.length - 1]} is not built (npm run build:native; needs libpcap-dev and a C compiler)` });
  }
  try {
    const addon = createRequire(import.meta.url)(file) as RingAddon;
    return (cached = { addon });
  } catch (e) {
    return (cached = { error: `${file}: ${(e as Error).message}` });
  }
}

/** The largest frame a port on `iface` should take whole: MTU + Ethernet header + one VLAN tag, at least 2048. */
export function ringFrameBytes(iface: string): number {
  try {
    const mtu = Number(readFileSync(`/sys/class/net/${iface}/mtu`, 'utf8').trim());
    if (Number.isInteger(mtu) && mtu > 0) return Math.max(MIN_FRAME_BYTES, mtu + 18);
  } catch {
    /* not visible here: the default */
  }
  return MIN_FRAME_BYTES;
}

export interface RingPortOptions {
  batch?: number;
  txSlots?: number;
  /** Largest frame taken whole (default: ringFrameBytes(iface)). */
  frameBytes?: number;
  /**
   * After the ring runs dry, keep looking for this many µs before sleeping (0: sleep at once). Default:
   * SLBX_RING_SPIN_US from the environment, else DEFAULT_SPIN_US.
   */
  spinUs?: number;
  /**
   * 1..65535: the socket joins this PACKET_FANOUT group (hash mode) of its network namespace: the kernel
   * gives each frame to one socket of the group by its symmetric flow hash, so every frame of a flow lands
   * on the same socket (--workers N: one socket per worker, same interface and filter). 0 or absent: none.
   * Fragments hash on their addresses only (no ports), so all fragments of a datagram land together.
   */
  fanoutGroup?: number;
  /**
   * With fanoutGroup: the group picks the socket by this classic BPF program instead of the flow hash
   * (PACKET_FANOUT_CBPF; struct sock_filter[] as bytes, host order; the program's value modulo the group's
   * size). The host agent's workers steer both directions of a flow with it (host-agent/worker-steering.ts).
   */
  fanoutProgram?: Uint8Array;
  /**
   * Sends skip the queue discipline (PACKET_QDISC_BYPASS, default true): the shortest path, but the
   * interface's taps (a tcpdump on it) do not see the frames sent. false: they do, as with libpcap.
   */
  qdiscBypass?: boolean;
}

/** A PACKET_FANOUT group id for this process's `port`-th port (1..65535): distinct per process and port. */
export function fanoutGroupId(pid: number, port: number): number {
  return 1 + ((pid * 4 + port) % 65535);
}

/** The default spin (µs) after a drained ring; see docs/performance.md. */
export const DEFAULT_SPIN_US = 0;

function envSpinUs(): number {
  const v = Number(process.env.SLBX_RING_SPIN_US);
  return Number.isInteger(v) && v >= 0 && v <= 1000 ? v : DEFAULT_SPIN_US;
}

export type FrameHandler = (frame: Buffer, len: number, truncated: boolean) => void;

export class RingPort {
  readonly iface: string;
  private readonly addon: RingAddon;
  private readonly opts: RingPortOptions;
  private h: object | null = null;
  private last: RingStats | null = null;
  /** send() calls the addon refused at once (returned false). */
  private refused = 0;
  /** txErrors of the handles closed so far (open() after close() starts a new handle at 0). */
  private closedTxErrors = 0;
  /** txCountedPackets and txCountedBytes of the handles closed so far. */
  private closedCountedPackets = 0;
  private closedCountedBytes = 0;
  /** The kernel takes a frame when its batch goes out, after send() returned: see sentCounted(). */
  readonly txDeferred = true;

  constructor(iface: string, addon: RingAddon, opts: RingPortOptions = {}) {
    this.iface = iface;
    this.addon = addon;
    this.opts = opts;
  }

  /** Opens the socket with a BPF filter (libpcap syntax); throws with the reason (bad filter, no such device). */
  open(filter: string, onFrame: FrameHandler, bufferBytes = 32 * 1024 * 1024): void {
    this.close();
    const batch = this.opts.batch ?? DEFAULT_RING_BATCH;
    const frameBytes = this.opts.frameBytes ?? ringFrameBytes(this.iface);
    const slot = frameBytes + 4;
    const rx = Buffer.alloc(batch * slot);
    const meta = new Uint32Array(batch * 2);
    // one view per slot, made once: the per-frame loop allocates nothing
    const views: Buffer[] = [];
    for (let i = 0; i < batch; i++) views.push(rx.subarray(i * slot, (i + 1) * slot));
    const onBatch = (n: number): void => {
      for (let i = 0; i < n; i++) onFrame(views[i]!, meta[2 * i]!, (meta[2 * i + 1]! & FLAG_TRUNCATED) !== 0);
    };
    this.h = this.addon.openPacket(
      this.iface,
      filter,
      bufferBytes,
      frameBytes,
      batch,
      this.opts.txSlots ?? DEFAULT_TX_SLOTS,
      true,
      rx,
      meta,
      onBatch,
      this.opts.spinUs ?? envSpinUs(),
      this.opts.fanoutGroup ?? 0,
      this.opts.qdiscBypass ?? true,
      this.opts.fanoutProgram ?? null,
    );
    this.last = null;
  }

  /**
   * Queues buf[off .. off + len) (copied at once); false when the kernel cannot take it at all. counted:
   * the frame counts in sentCounted() once the kernel took it.
   */
  send(buf: Uint8Array, off: number, len: number, counted = false): boolean {
    const h = this.h;
    if (h === null) return false;
    if (this.addon.send(h, buf, off, len, counted) === 0) return true;
    this.refused++;
    return false;
  }

  /**
   * Frames send() accepted (queued) that the kernel then refused when their batch went out (sendmmsg:
   * ENOBUFS, EAGAIN, ENETDOWN, ...), since this port was made, across reopens. Reads the addon's
   * counters: call it from a timer or a status read, not per packet.
   */
  deferredSendErrors(): number {
    const now = this.h !== null ? this.addon.stats(this.h).txErrors : 0;
    return this.closedTxErrors + now - this.refused;
  }

  /**
   * Frames sent with `counted` that the kernel took (out[0]) and their bytes (out[1]), since this port
   * was made, across reopens. Reads the addon's counters: from a timer or a status read, not per packet.
   */
  sentCounted(out: Float64Array): void {
    const st = this.h !== null ? this.addon.stats(this.h) : null;
    out[0] = this.closedCountedPackets + (st?.txCountedPackets ?? 0);
    out[1] = this.closedCountedBytes + (st?.txCountedBytes ?? 0);
  }

  /** Sends what is queued now (sends inside a batch go out when the batch ends anyway). */
  flush(): void {
    if (this.h !== null) this.addon.flush(this.h);
  }

  get isOpen(): boolean {
    return this.h !== null;
  }

  /** The addon's counters (receive batches, kernel drops, send errors); kept after close. */
  stats(): RingStats | null {
    if (this.h !== null) this.last = this.addon.stats(this.h);
    return this.last;
  }

  get sendErrors(): number {
    return this.stats()?.txErrors ?? 0;
  }

  get lastSendError(): string {
    return this.stats()?.txLastError ?? '';
  }

  close(): void {
    if (this.h !== null) {
      this.last = this.addon.stats(this.h);
      this.closedTxErrors += this.last.txErrors;
      this.closedCountedPackets += this.last.txCountedPackets ?? 0;
      this.closedCountedBytes += this.last.txCountedBytes ?? 0;
      this.addon.close(this.h);
      this.h = null;
    }
  }
}

/**
 * Whole IP packets (header included) on an IPPROTO_RAW socket, every one routed by one next hop, sent
 * in batches like RingPort's: RawSender's send(), batched (the host agent's direct server return).
 */
export class RingRawSender {
  private readonly addon: RingAddon;
  private h: object | null;
  private last: RingStats | null = null;
  /** send() calls the addon refused at once (returned false). */
  private refused = 0;

  constructor(addon: RingAddon, family: 4 | 6, via: string, txSlots = DEFAULT_TX_SLOTS) {
    this.addon = addon;
    this.h = addon.openRaw(family, via, txSlots, MIN_FRAME_BYTES);
  }

  send(buf: Uint8Array, off: number, len: number): boolean {
    const h = this.h;
    if (h === null) return false;
    if (this.addon.send(h, buf, off, len) === 0) return true;
    this.refused++;
    return false;
  }

  /** Packets send() accepted that the kernel refused when their batch went out (see RingPort's). */
  deferredSendErrors(): number {
    return (this.stats()?.txErrors ?? 0) - this.refused;
  }

  /** Sends what is queued now (outside a batch every send goes out at once anyway). */
  flush(): void {
    if (this.h !== null) this.addon.flush(this.h);
  }

  stats(): RingStats | null {
    if (this.h !== null) this.last = this.addon.stats(this.h);
    return this.last;
  }

  get sent(): number {
    return this.stats()?.txPackets ?? 0;
  }

  get sendErrors(): number {
    return this.stats()?.txErrors ?? 0;
  }

  get lastSendError(): string {
    return this.stats()?.txLastError ?? '';
  }

  close(): void {
    if (this.h !== null) {
      this.last = this.addon.stats(this.h);
      this.addon.close(this.h);
      this.h = null;
    }
  }
}
