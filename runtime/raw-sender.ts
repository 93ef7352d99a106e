// Sends whole IP packets (header included) with a raw socket (`raw-socket`, IPPROTO_RAW, which implies
// IP_HDRINCL / IPV6_HDRINCL). The kernel routes each packet by the address given to sendto(2), not by
// its header: passing the next hop (the router) as that address sends every packet to the router
// whatever its destination, and saves a string per packet. raw-socket's public send() queues one
// packet per event-loop turn; slbx calls the synchronous sendto of its wrap directly.
// Two uses: send() routes by the fixed `via` of the constructor (the host agent's DSR return toward the
// router); sendTo() routes by an address given per packet (the MUX's `raw` send path, by each host's
// PA: a string the caller precomputes once per host, never one per packet).
import raw from 'raw-socket';

const IPPROTO_RAW = 255;

export class RawSender {
  private readonly sock: ReturnType<typeof raw.createSocket>;
  private readonly via: string;
  private readonly done = (_bytes: number): void => {};
  sendErrors = 0;
  lastSendError = '';
  sent = 0;

  /** `via`: the address send() routes by (the next hop), IPv4 or IPv6 to match `family`; '' if only sendTo is used. */
  constructor(family: 4 | 6, via = '') {
    this.sock = raw.createSocket({ protocol: IPPROTO_RAW, addressFamily: family === 6 ? raw.AddressFamily.IPv6 : raw.AddressFamily.IPv4 });
    this.sock.on('error', (e: Error) => {
      this.sendErrors++;
      this.lastSendError = e.message;
    });
    this.via = via;
  }

  send(buf: Buffer, off: number, len: number): boolean {
    try {
      this.sock.wrap.send(buf, off, len, this.via, this.done);
      this.sent++;
      return true;
    } catch (e) {
      this.sendErrors++;
      this.lastSendError = (e as Error).message;
      return false;
    }
  }

  /** Sends buf[off .. off + len) (a whole IP packet), routed by `address` (text, of this socket's family). */
  sendTo(buf: Buffer, off: number, len: number, address: string): boolean {
    try {
      this.sock.wrap.send(buf, off, len, address, this.done);
      this.sent++;
      return true;
    } catch (e) {
      this.sendErrors++;
      this.lastSendError = (e as Error).message;
      return false;
    }
  }

  /** sendto(2) reports every refusal at once (send() and sendTo() return false): never any later. */
  deferredSendErrors(): number {
    return 0;
  }

  close(): void {
    try {
      this.sock.close();
    } catch {
      /* already closed */
    }
  }
}
