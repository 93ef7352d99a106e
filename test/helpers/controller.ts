// A controller on 127.0.0.1 (a free port) with its state file in a temp directory, for the API,
// policy client and slbctl tests. No namespaces.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startController, type ControllerHandle } from '../../controller/main.js';
import { configureLog } from '../../runtime/log.js';
import { requestJson, type JsonResponse } from '../../runtime/http-json.js';
import type { SlbxConfig } from '../../shared/config.js';
import { labConfig } from './lab-config.js';

export interface TestController {
  handle: ControllerHandle;
  url: string;
  port: number;
  dir: string;
  statePath: string;
  /** One API request: method, path, JSON body. */
  req(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<JsonResponse>;
  stop(): Promise<void>;
  /** Stops and starts again from the same state file (no --init), on the same port. */
  restart(): Promise<void>;
  cleanup(): Promise<void>;
}

export async function startTestController(
  o: { init?: SlbxConfig | null; dir?: string; port?: number; token?: string | null } = {},
): Promise<TestController> {
  configureLog('controller', 'error');
  const dir = o.dir ?? mkdtempSync(join(tmpdir(), 'slbx-controller-test-'));
  const statePath = join(dir, 'state.json');
  let handle: Awaited<ReturnType<typeof startController>>;
  try {
    handle = await startController({
      statePath,
      init: o.init === undefined ? labConfig() : o.init,
      listen: [{ host: '127.0.0.1', port: o.port ?? 0 }],
      token: o.token ?? null,
    });
  } catch (e) {
    if (o.dir === undefined) rmSync(dir, { recursive: true, force: true }); // a refused start leaves nothing behind
    throw e;
  }
  const port = handle.api.port();
  const url = `http://127.0.0.1:${port}`;
  let stopped = false;
  const t: TestController = {
    get handle() {
      return handle;
    },
    url,
    port,
    dir,
    statePath,
    req: (method, path, body, headers) => requestJson(new URL(`${url}${path}`), { method, body, headers, timeoutMs: 30_000 }),
    async stop() {
      if (!stopped) {
        stopped = true;
        await handle.stop();
      }
    },
    async restart() {
      await t.stop();
      handle = await startController({ statePath, init: null, listen: [{ host: '127.0.0.1', port }], token: o.token ?? null });
      stopped = false;
    },
    async cleanup() {
      await t.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return t;
}
