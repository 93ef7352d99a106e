// The lab client's records as the verifiers read them (scripts/lab/client.ts: readClientJson): the
// file a real client run writes reads back typed, with the source port of every request; a file of
// another mode, or a record without a field of its type, is refused naming the file, record and field.
// The client runs as a child against servers on loopback (dist/, built by `npx tsc -p tsconfig.json`).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { createSocket, type Socket } from 'node:dgram';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { checkClientRecords, readClientJson, readClientRecordsOf } from '../scripts/lab/client.js';
import { unmet } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLIENT = join(ROOT, 'dist/scripts/lab/client.js');

describe.skipIf(unmet(existsSync(CLIENT) ? null : 'dist/scripts/lab/client.js is not built (npx tsc -p tsconfig.json)', 'the lab client'))(
  'lab client records',
  () => {
    let dir = '';
    let http: Server;
    let udp: Socket;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'client-records-'));
      http = createServer((_req, res) => {
        res.setHeader('x-backend', 'vm7');
        res.end('vm7\n');
      });
      await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
      udp = createSocket('udp4');
      udp.on('message', (m, from) => udp.send(Buffer.concat([Buffer.from('vm8 '), m]), from.port, from.address));
      await new Promise<void>((r) => udp.bind(0, '127.0.0.1', r));
    });
    afterAll(() => {
      http.close();
      udp.close();
      rmSync(dir, { recursive: true, force: true });
    });
    // asynchronously: the servers run in this process
    const run = (args: string[]) =>
      new Promise<number | null>((resolve) => {
        const c = spawn(process.execPath, [CLIENT, ...args], { stdio: 'ignore' });
        c.on('close', resolve);
      });

    it('an http run reads back typed, every record with its source port and backend', async () => {
      const file = join(dir, 'http.json');
      const port = (http.address() as AddressInfo).port;
      expect(await run(['http', '--url', `http://127.0.0.1:${port}/`, '--count', '5', '--json', file])).toBe(0);
      const j = readClientJson(file, 'http');
      expect(j.mode).toBe('http');
      expect(j.summary.total).toBe(5);
      expect(j.records.map((r) => [r.ok, r.backend, typeof r.sourcePort, r.sourceAddress])).toEqual(
        Array.from({ length: 5 }, () => [true, 'vm7', 'number', '127.0.0.1']),
      );
      expect(() => readClientJson(file, 'udp')).toThrow(`${file}: the records of client.js http, not udp`);
    });

    it('a udp run too; its .jsonl form holds the records alone', async () => {
      const file = join(dir, 'udp.jsonl');
      const port = (udp.address() as AddressInfo).port;
      expect(await run(['udp', '--target', `127.0.0.1:${port}`, '--flows', '4', '--json', file])).toBe(0);
      const recs = readClientRecordsOf(file, 'udp');
      expect(recs.map((r) => [r.ok, r.backend, typeof r.sourcePort])).toEqual(Array.from({ length: 4 }, () => [true, 'vm8', 'number']));
      expect(() => readClientRecordsOf(file, 'hold')).toThrow(/record 0 has no connectMs \(not a client\.js hold record\)/);
    });

    it('a record without a field of its type, or with a source port that is no number, is refused', () => {
      const file = join(dir, 'http.json');
      const doc = JSON.parse(readFileSync(file, 'utf8')) as { records: Record<string, unknown>[] };
      const { sourcePort: _, ...noPort } = doc.records[0]!;
      expect(() => checkClientRecords([noPort], 'http', 'x.json')).toThrow(
        'x.json: record 0 has no sourcePort (not a client.js http record)',
      );
      expect(() => checkClientRecords([{ ...doc.records[0], sourcePort: '80' }], 'http', 'x.json')).toThrow(
        'x.json: record 0: sourcePort is not a number or null',
      );
      expect(() => checkClientRecords([{ ...doc.records[0], ok: 'yes' }], 'http', 'x.json')).toThrow(
        'x.json: record 0: ok is not a boolean',
      );
      writeFileSync(join(dir, 'bad.json'), JSON.stringify({ mode: 'http', records: {} }));
      expect(() => readClientJson(join(dir, 'bad.json'), 'http')).toThrow(/no records array/);
    });
  },
);
