// The lab client's http --rate (scripts/lab/client.ts): request i starts no earlier than i/N s after the
// start, so N new connections a second make a steady stream (scenario 17). Against an HTTP server on
// loopback in this process; the client runs as a child (dist/, built by `npx tsc -p tsconfig.json`).
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { unmet } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLIENT = join(ROOT, 'dist/scripts/lab/client.js');

function runClient(args: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLIENT, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.on('close', (code) => resolve({ code, stdout }));
  });
}

describe.skipIf(unmet(existsSync(CLIENT) ? null : 'dist/scripts/lab/client.js is not built (npx tsc -p tsconfig.json)', 'the lab client'))(
  'lab client http --rate',
  () => {
    it('paces the requests: 30 at 100/s take about 0.3 s, and start 10 ms apart', async () => {
      const server = createServer((_req, res) => {
        res.setHeader('x-backend', 'loopback');
        res.end('loopback\n');
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const port = (server.address() as AddressInfo).port;
      try {
        const { code, stdout } = await runClient([
          'http',
          '--url',
          `http://127.0.0.1:${port}/`,
          '--count',
          '30',
          '--rate',
          '100',
          '--concurrency',
          '8',
          '--json',
          '-',
        ]);
        expect(code).toBe(0);
        const doc = JSON.parse(stdout) as { summary: { ok: number; elapsedMs: number }; records: { i: number; startMs: number }[] };
        expect(doc.summary.ok).toBe(30);
        expect(doc.summary.elapsedMs).toBeGreaterThanOrEqual(285);
        for (const r of doc.records) expect(r.startMs).toBeGreaterThanOrEqual(r.i * 10 - 1);
      } finally {
        server.close();
      }
    });

    it('refuses a rate that is not a positive integer', async () => {
      const { code } = await runClient(['http', '--url', 'http://127.0.0.1:9/', '--rate', '0']);
      expect(code).toBe(2);
    });
  },
);
