// runtime/http-json.ts requestJson with a signal already aborted (a policy client's heartbeat posted
// after stop(): the client aborts its signal and destroys its agent). The request is made and destroyed
// at once; before the fix it had no error listener yet, and its "socket hang up" was an uncaught
// exception (vitest failed a CI rehearsal on it, from test/controller-policy-client.test.ts). It must
// reject with ABORTED and raise nothing else.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { requestJson } from '../runtime/http-json.js';

describe('requestJson with an aborted signal', () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => res.end('{}'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('rejects with ABORTED, and nothing is thrown later (no uncaught "socket hang up")', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.prependListener('uncaughtException', onUncaught);
    try {
      const ac = new AbortController();
      ac.abort();
      const agent = new Agent({ keepAlive: true });
      agent.destroy();
      for (const a of [agent, undefined]) {
        await expect(
          requestJson(new URL(`http://127.0.0.1:${port}/status`), { method: 'POST', body: { x: 1 }, signal: ac.signal, agent: a }),
        ).rejects.toMatchObject({ code: 'ABORTED' });
      }
      // the destroyed request's error, if unhandled, comes on a later tick
      await new Promise((r) => setTimeout(r, 100));
      expect(uncaught).toEqual([]);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
    }
  });
});
