// Types for the parts of `cap` (libpcap bindings, CommonJS) that slbx uses.
declare module 'cap' {
  import { EventEmitter } from 'node:events';
  export class Cap extends EventEmitter {
    constructor();
    /** Opens a live capture; returns the link type name ('ETHERNET', ...). Throws on failure. */
    open(device: string, filter: string, bufSize: number, buffer: Buffer): string;
    /** pcap_sendpacket of buffer[0..size); throws on failure. */
    send(buffer: Buffer, size?: number): void;
    close(): boolean;
    on(event: 'packet', listener: (nbytes: number, truncated: boolean) => void): this;
    static deviceList(): { name: string; addresses: { addr: string }[] }[];
    static findDevice(ip?: string): string | undefined;
  }
  const cap: { Cap: typeof Cap };
  export default cap;
}
