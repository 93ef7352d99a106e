// A live capture on one interface with frame injection on the same handle (libpcap via `cap`).
// `cap` calls back once per packet with the packet copied into one shared Buffer: the handler must be
// done with it before it returns (the data planes are synchronous, so they are).
import capModule from 'cap';

const { Cap } = capModule;

export const DEFAULT_CAPTURE_BUFFER_BYTES = 32 * 1024 * 1024;
const RX_BUFFER_BYTES = 65536 + 64;

export type FrameHandler = (frame: Buffer, len: number, truncated: boolean) => void;

/** See PcapPort.close(). */
const CLOSED_CAPS: unknown[] = [];

export class PcapPort {
  readonly iface: string;
  readonly rx: Buffer = Buffer.alloc(RX_BUFFER_BYTES);
  private cap: InstanceType<typeof Cap> | null = null;
  sendErrors = 0;
  lastSendError = '';
  private viewBuf: Uint8Array | null = null;
  private viewOff = 0;
  private view: Buffer = Buffer.alloc(0);

  constructor(iface: string) {
    this.iface = iface;
  }

  /** Opens the capture with a BPF filter; throws with libpcap's message (bad filter, no such device). */
  open(filter: string, onFrame: FrameHandler, bufferBytes = DEFAULT_CAPTURE_BUFFER_BYTES): void {
    this.close();
    const cap = new Cap();
    const linkType = cap.open(this.iface, filter, bufferBytes, this.rx);
    if (linkType !== 'ETHERNET') {
      cap.close();
      throw new Error(`${this.iface}: link type ${linkType}, slbx needs Ethernet`);
    }
    const rx = this.rx;
    cap.on('packet', (nbytes: number, truncated: boolean) => onFrame(rx, nbytes, truncated));
    this.cap = cap;
  }

  /**
   * Sends buf[off .. off + len); false (and counted) when the kernel refuses it, e.g. larger than the MTU.
   * `cap` sends from the start of a Buffer: another offset, or a Uint8Array that is not a Buffer, goes
   * through a view (see viewFrom).
   */
  send(buf: Uint8Array, off: number, len: number): boolean {
    const cap = this.cap;
    if (cap === null) return false;
    try {
      cap.send(off === 0 && Buffer.isBuffer(buf) ? buf : this.viewFrom(buf, off), len);
      return true;
    } catch (e) {
      this.sendErrors++;
      this.lastSendError = (e as Error).message;
      return false;
    }
  }

  /**
   * A Buffer over buf[off ..]. The last one is kept and used again while buf and off stay the same: the
   * host agent sends every delivered frame from one offset of its receive buffer, so no view is made per
   * frame. A view shares buf's memory: it sends the bytes as they are at the send.
   */
  private viewFrom(buf: Uint8Array, off: number): Buffer {
    if (buf !== this.viewBuf || off !== this.viewOff) {
      this.view = Buffer.from(buf.buffer, buf.byteOffset + off, buf.byteLength - off);
      this.viewBuf = buf;
      this.viewOff = off;
    }
    return this.view;
  }

  /** pcap_sendpacket reports every refusal at once (send() returns false): never any later. */
  deferredSendErrors(): number {
    return 0;
  }

  /** send() returning true means the kernel took the frame: the caller counts it then. */
  readonly txDeferred = false;

  /** Nothing is counted here (txDeferred is false): both 0. */
  sentCounted(out: Float64Array): void {
    out[0] = 0;
    out[1] = 0;
  }

  get isOpen(): boolean {
    return this.cap !== null;
  }

  close(): void {
    if (this.cap !== null) {
      this.cap.close();
      // cap's close() stops its libuv poll handle without closing it; when the closed Cap is garbage
      // collected, libuv touches the freed handle and the process dies (SIGSEGV after a few config
      // reloads). Closed captures are therefore kept for the life of the process: a few bytes each,
      // and captures are only reopened on policy changes.
      CLOSED_CAPS.push(this.cap);
      this.cap = null;
    }
  }
}
