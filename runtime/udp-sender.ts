// A connected UDP socket (`node:dgram`) to one remote address and port, with a ring of preallocated
// send buffers. The MUX's `udp` send path uses one per host: the kernel builds the outer IPv4 and UDP
// headers (and does ARP), the MUX hands it VXLAN header + inner frame.
//
// Why a ring: dgram's send() is asynchronous, and the buffer handed to it belongs to it until its
// callback (CONVENTIONS.md, "The hot path"). Each send copies the payload into the next free slot; a slot
// is free again when the callback of the send that used it has run. Callbacks of one socket run in send
// order (libuv queues every send behind the first one it could not write at once, and a send it wrote at
// once completes on the next tick), so "in flight < slots" means the slot at the head is free. A full ring
// is a drop, counted, never a wait.
//
// Why connected: dgram.send with an address string pays a lookup per packet (measured: docs/design.md). A connected
// socket also reports ICMP port unreachable from the remote as ECONNREFUSED, on the next send's callback
// or as an `error` event: both are handled here (counted, logged by the caller), or the process would die.
//
// What dgram still allocates per packet, whatever we do: the request object, an array of buffers and a
// Buffer view for (offset, length).
import { createSocket, type Socket } from 'node:dgram';

export interface UdpRingSenderOptions {
  family: 4 | 6;
  /** Local address to bind (the source address the kernel writes), or '' for the kernel's choice. */
  local: string;
  remote: string;
  port: number;
  /** Ring size: sends in flight at most. */
  slots: number;
  /** Largest payload. */
  slotBytes: number;
  /** SO_SNDBUF in bytes (the kernel caps it at net.core.wmem_max), or 0 to leave the default. */
  sendBufferBytes?: number;
  /** Called once when the socket is connected, or with an error when binding or connecting fails. */
  onReady?: (error: Error | null) => void;
  /** Called on each asynchronous socket error (counted already). */
  onError?: (error: Error) => void;
  /**
   * Called when the send of a datagram send() accepted completes: ok with its length, or not ok (the
   * kernel refused it: ENETUNREACH, ENOBUFS, ECONNREFUSED after an ICMP port unreachable). Also called
   * not ok with length 0 for an `error` event once connected (a refusal reported on no particular
   * send). Nothing is allocated; the MUX counts tx_packets or send_error_udp here, after the send.
   */
  onSendResult?: (ok: boolean, len: number) => void;
}

/** Why the last send() returned false (UdpRingSender.refusal). */
export const UDP_REFUSED_NONE = 0;
export const UDP_REFUSED_NOT_CONNECTED = 1;
export const UDP_REFUSED_RING_FULL = 2;
export const UDP_REFUSED_TOO_BIG = 3;
/** The socket's send threw (counted in sendErrors too). */
export const UDP_REFUSED_ERROR = 4;

export class UdpRingSender {
  readonly local: string;
  readonly remote: string;
  readonly port: number;
  /** The socket's local port once connected: the outer UDP source port of everything it sends. */
  localPort = 0;
  connected = false;
  sent = 0;
  /** Sends refused because every slot was in flight. */
  ringFull = 0;
  /** Sends refused before the socket was connected (or after it failed). */
  notConnected = 0;
  /** Payloads larger than a slot. */
  tooBig = 0;
  /** Errors reported by send callbacks or `error` events (ECONNREFUSED after ICMP port unreachable, ...). */
  sendErrors = 0;
  /** Of sendErrors, those reported after send() had accepted the datagram (callbacks, `error` events). */
  deferredErrors = 0;
  lastSendError = '';
  /** Why the last send() that returned false refused (UDP_REFUSED_*). */
  refusal = UDP_REFUSED_NONE;
  private readonly sock: Socket;
  private readonly onSendResult: ((ok: boolean, len: number) => void) | undefined;
  /** The length sent from each slot (callbacks come in send order: the oldest in flight is head - inFlight). */
  private readonly lens: Uint32Array;
  private readonly ring: Buffer[];
  private head = 0;
  private inFlight = 0;
  private closed = false;
  private readonly onSent = (err: Error | null): void => {
    const n = this.ring.length;
    const slot = this.head - this.inFlight;
    const len = this.lens[slot < 0 ? slot + n : slot]!;
    this.inFlight--;
    if (err) {
      this.sendErrors++;
      this.deferredErrors++;
      this.lastSendError = err.message;
    }
    this.onSendResult?.(!err, len);
  };

  constructor(o: UdpRingSenderOptions) {
    if (!Number.isInteger(o.slots) || o.slots < 1) throw new Error(`slots must be a positive integer, got ${o.slots}`);
    this.local = o.local;
    this.remote = o.remote;
    this.port = o.port;
    this.onSendResult = o.onSendResult;
    this.lens = new Uint32Array(o.slots);
    const block = Buffer.alloc(o.slots * o.slotBytes);
    this.ring = Array.from({ length: o.slots }, (_, i) => block.subarray(i * o.slotBytes, (i + 1) * o.slotBytes));
    const sock = createSocket({
      type: o.family === 6 ? 'udp6' : 'udp4',
      ...(o.sendBufferBytes ? { sendBufferSize: o.sendBufferBytes } : {}),
    });
    this.sock = sock;
    let ready = false;
    const done = (e: Error | null) => {
      if (ready) return;
      ready = true;
      o.onReady?.(e);
    };
    sock.on('error', (e: Error) => {
      this.sendErrors++;
      this.lastSendError = e.message;
      if (!ready) done(e);
      else {
        this.deferredErrors++;
        this.onSendResult?.(false, 0);
        o.onError?.(e);
      }
    });
    // nothing is expected back; read and drop whatever comes, so it cannot pile up
    sock.on('message', () => {});
    sock.bind({ address: o.local || undefined, port: 0 }, () => {
      sock.connect(o.port, o.remote, (e?: Error) => {
        if (this.closed) return;
        if (e) {
          done(e);
          return;
        }
        this.connected = true;
        this.localPort = sock.address().port;
        done(null);
      });
    });
  }

  /** Sends buf[off .. off + len) as one datagram; false (and counted) when it could not be queued. */
  send(buf: Buffer, off: number, len: number): boolean {
    if (!this.connected) {
      this.notConnected++;
      this.refusal = UDP_REFUSED_NOT_CONNECTED;
      return false;
    }
    const ring = this.ring;
    if (this.inFlight >= ring.length) {
      this.ringFull++;
      this.refusal = UDP_REFUSED_RING_FULL;
      return false;
    }
    const slot = ring[this.head]!;
    if (len > slot.length) {
      this.tooBig++;
      this.refusal = UDP_REFUSED_TOO_BIG;
      return false;
    }
    buf.copy(slot, 0, off, off + len);
    this.lens[this.head] = len;
    this.head = this.head + 1 === ring.length ? 0 : this.head + 1;
    this.inFlight++;
    try {
      this.sock.send(slot, 0, len, this.onSent);
    } catch (e) {
      this.inFlight--;
      this.sendErrors++;
      this.lastSendError = (e as Error).message;
      this.refusal = UDP_REFUSED_ERROR;
      return false;
    }
    this.sent++;
    return true;
  }

  get queued(): number {
    return this.inFlight;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.connected = false;
    try {
      this.sock.close();
    } catch {
      /* already closed */
    }
  }
}
