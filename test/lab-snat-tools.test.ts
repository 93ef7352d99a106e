// The lab's outbound NAT tools (scripts/lab/snat-server.ts, snat-client.ts) against each other on
// loopback, without a NAT: the source the server names must be the client's own socket (its local port,
// which the kernel gave it), every byte echoed, the server's records matching the client's; a port with
// nothing listening gives failed connections and unanswered flows, never ok.
import { afterEach, describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { startSnatServer, type SnatServer } from '../scripts/lab/snat-server.js';
import { runSnatClient, type SnatClientOptions } from '../scripts/lab/snat-client.js';

const base = (server: string, tcpPort: number, udpPort: number): SnatClientOptions => ({
  server,
  tcpPort,
  udpPort,
  tcp: 20,
  udp: 10,
  seconds: 2,
  messageBytes: 100,
  intervalMs: 200,
  rampMs: 200,
  timeoutMs: 20000,
  udpRetries: 3,
  udpRetryMs: 1000,
  udpIntervalMs: 1000,
});

describe('snat-server and snat-client', () => {
  let srv: SnatServer | null = null;
  afterEach(async () => {
    await srv?.close();
    srv = null;
  });

  for (const addr of ['127.0.0.1', '::1']) {
    it(`every connection and flow completes over ${addr}, and both sides' records agree`, async () => {
      srv = await startSnatServer(0, 0);
      const rep = await runSnatClient(base(addr, srv.tcpPort, srv.udpPort));
      expect(rep.tcp).toEqual({ opened: 20, ok: 20, failed: 0, reset: 0 });
      expect(rep.udp).toMatchObject({ opened: 10, ok: 10, failed: 0 });
      for (const r of rep.tcpRecords) {
        expect(r.seenSrc).toBe(addr);
        expect(r.seenPort).toBe(r.localPort); // no NAT: the server saw the client's own port
        // whole messages, at least the one sent on connect (how many the timers sent depends on the machine's load)
        expect(r.bytesSent % 100 === 0 && r.bytesSent >= 100).toBe(true);
        expect(r.bytesEchoed).toBe(r.bytesSent);
      }
      for (const r of rep.udpRecords) {
        expect([r.seenSrc, r.seenPort, r.seenSources, r.answered, r.strangers]).toEqual([addr, r.localPort, 1, 2, 0]);
      }
      // let the server see the last FINs
      await new Promise((res) => setTimeout(res, 200));
      const recs = srv.records();
      expect(recs.tcp).toHaveLength(20);
      for (const r of rep.tcpRecords) {
        const s = recs.tcp.find((x) => x.sport === r.localPort)!;
        expect([s.src, s.end, s.bytesIn, s.dport]).toEqual([addr, 'fin', r.bytesSent, srv.tcpPort]);
        expect(s.closedMs).not.toBeNull();
      }
      expect(recs.udp.map((u) => u.sport).sort()).toEqual(rep.udpRecords.map((u) => u.localPort).sort());
      for (const u of recs.udp) expect(u.datagrams).toBeGreaterThanOrEqual(2);
    }, 30000);
  }

  it('nothing listening: every connection failed, every flow unanswered', async () => {
    // a port just freed by a server of our own: nothing listens there now
    const free = await new Promise<number>((res) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => res(p));
      });
    });
    const rep = await runSnatClient({ ...base('127.0.0.1', free, free), tcp: 3, udp: 2, udpRetries: 1, udpRetryMs: 200 });
    expect(rep.tcp).toEqual({ opened: 3, ok: 0, failed: 3, reset: 0 });
    expect(rep.udp).toMatchObject({ opened: 2, ok: 0, failed: 2 });
  }, 30000);
});
