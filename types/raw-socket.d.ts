// Types for the parts of `raw-socket` (CommonJS) that slbx uses.
declare module 'raw-socket' {
  import { EventEmitter } from 'node:events';
  export interface SocketWrap {
    /** Synchronous sendto(2) of buffer[offset..offset+length) to address; calls cb(bytes) before returning. */
    send(buffer: Buffer, offset: number, length: number, address: string, cb: (bytes: number) => void): void;
    close(): void;
  }
  export interface Socket extends EventEmitter {
    wrap: SocketWrap;
    send(buffer: Buffer, offset: number, length: number, address: string, after: (error: Error | null, bytes: number) => void): Socket;
    setOption(level: number, option: number, value: number | Buffer, length?: number): void;
    close(): Socket;
  }
  const raw: {
    createSocket(options?: { protocol?: number; addressFamily?: number; bufferSize?: number }): Socket;
    AddressFamily: { IPv4: number; IPv6: number };
    Protocol: { None: number; ICMP: number; TCP: number; UDP: number; ICMPv6: number };
    SocketLevel: Record<string, number>;
    SocketOption: Record<string, number>;
  };
  export default raw;
}
