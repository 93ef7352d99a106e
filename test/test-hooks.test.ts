// --test-hooks (runtime/test-hooks.ts) through the daemons' common main (runtime/daemon-main.ts), run
// in-process with a stand-in daemon: without the flag the endpoint stays read-only (any POST 405, as
// scenario 18 requires) and GET /test/workers answers 404, and no worker is touched; with it the POST makes exactly that worker exit (the daemon's
// exitWorkerForTest) and answers the thread that exits, a worker out of range is 404 naming the range, a
// daemon without workers 409 naming --workers; other methods stay 405. Scenario 44 uses it on the real daemons.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fileURLToPath } from 'node:url';
import type { SlbxConfig } from '../shared/config.js';
import { runDaemon, type Daemon, type DaemonProgram } from '../runtime/daemon-main.js';

const LAB = fileURLToPath(new URL('../examples/lab.yaml', import.meta.url));

class WorkersDaemon implements Daemon {
  exits: number[] = [];
  constructor(readonly threads: (number | null)[]) {}
  start(): void {}
  stop(): void {}
  applyConfig(_config: SlbxConfig): void {}
  exitWorkerForTest(index: number): void {
    this.exits.push(index);
  }
  workerThreadIdsForTest(): (number | null)[] {
    return this.threads;
  }
}

function program(d: WorkersDaemon): DaemonProgram {
  return {
    program: 'slbx-mux',
    usage: 'fake',
    about: 'a stand-in MUX',
    options: [],
    defaultStatus: '127.0.0.1:9180',
    extraHelp: '',
    create: () => d,
    routes: () => (path) => (path === '/status' ? { daemon: 'mux', ready: true } : undefined),
  };
}

let stops: (() => Promise<number>)[] = [];
afterEach(async () => {
  for (const s of stops) await s();
  stops = [];
  vi.restoreAllMocks();
});

let nextPort = 20000 + (process.pid % 20000);
/** Runs the main in-process on a loopback port; returns a request function. */
async function run(d: WorkersDaemon, extra: string[]) {
  const port = nextPort++;
  const before = new Set(process.listeners('SIGTERM'));
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  const done = runDaemon(program(d), ['--config', LAB, '--name', 'mux1', '--status', `127.0.0.1:${port}`, ...extra]);
  stops.push(async () => {
    const added = process.listeners('SIGTERM').filter((l) => !before.has(l));
    for (const l of added) (l as () => void)();
    const code = await done;
    for (const l of added) process.removeListener('SIGTERM', l);
    for (const l of process.listeners('SIGINT').filter((l) => !before.has(l as never))) process.removeListener('SIGINT', l);
    return code;
  });
  const req = async (method: string, path: string) => {
    for (let i = 0; ; i++) {
      try {
        const r = await fetch(`http://127.0.0.1:${port}${path}`, { method });
        return { status: r.status, body: (await r.json()) as Record<string, unknown> };
      } catch (e) {
        if (i > 100) throw e; // not listening yet
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };
  return req;
}

describe('--test-hooks', () => {
  it('off (the default): POST is refused (read-only), the hook paths are 404 and no worker exits', async () => {
    const d = new WorkersDaemon([11, 12]);
    const req = await run(d, []);
    expect((await req('GET', '/status')).status).toBe(200);
    expect((await req('POST', '/test/workers/0/exit')).status).toBe(405);
    expect((await req('POST', '/policy')).status).toBe(405);
    expect((await req('GET', '/test/workers')).status).toBe(404);
    expect(d.exits).toEqual([]);
  });

  it('on: POST makes that worker exit and names its thread; GET lists the threads; bad requests are refused', async () => {
    const d = new WorkersDaemon([11, 12]);
    const req = await run(d, ['--test-hooks']);
    expect(await req('GET', '/test/workers')).toEqual({
      status: 200,
      body: {
        workers: [
          { worker: 0, threadId: 11 },
          { worker: 1, threadId: 12 },
        ],
      },
    });
    expect(await req('POST', '/test/workers/1/exit')).toEqual({ status: 200, body: { worker: 1, threadId: 12, exiting: true } });
    expect(d.exits).toEqual([1]);
    const far = await req('POST', '/test/workers/2/exit');
    expect(far).toEqual({ status: 404, body: { error: 'no worker 2: workers are 0..1' } });
    expect((await req('POST', '/status')).status).toBe(404);
    expect((await req('PUT', '/test/workers/0/exit')).status).toBe(405);
    expect(d.exits).toEqual([1]);
  });

  it('on, but no worker threads: 409 naming --workers', async () => {
    const d = new WorkersDaemon([]);
    const req = await run(d, ['--test-hooks']);
    const r = await req('POST', '/test/workers/0/exit');
    expect(r.status).toBe(409);
    expect(String(r.body.error)).toMatch(/--workers N/);
    expect(d.exits).toEqual([]);
  });
});
