// Fault injection for tests (--test-hooks on slbx-mux and slbx-host-agent; off by default): on the status
// endpoint, POST /test/workers/<i>/exit makes worker thread i exit (the daemon restarts it, the others go
// on: docs/reliability.md), GET /test/workers lists the workers' thread ids (a restarted worker is a new
// thread). Without the flag the endpoint takes no POST (405: read-only) and GET /test/workers is 404. Scenario 44 uses them.

/** What a daemon with worker threads offers the hooks (both daemons' exitWorkerForTest). */
export interface WorkerTestHooks {
  exitWorkerForTest(index: number): void;
  /** Each worker's thread id, null while it is not running ([]: no worker threads). */
  workerThreadIdsForTest(): (number | null)[];
}

export const TEST_HOOKS_HELP =
  'for tests only: POST /test/workers/<i>/exit on the status endpoint makes worker thread i exit (it is restarted), GET /test/workers lists their thread ids; off: POST 405, GET 404';

/** Thrown for a request the hooks refuse: the status endpoint answers `status` with the message. */
export class HookRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** GET /test/workers: the thread ids; undefined for any other path. */
export function testHookGet(d: WorkerTestHooks, path: string): unknown {
  if (path !== '/test/workers') return undefined;
  return { workers: d.workerThreadIdsForTest().map((threadId, worker) => ({ worker, threadId })) };
}

/** POST /test/workers/<i>/exit: worker i is told to exit; the answer names the thread that exits. Undefined: no such path. */
export function testHookPost(d: WorkerTestHooks, path: string): unknown {
  const m = /^\/test\/workers\/(\d{1,3})\/exit$/.exec(path);
  if (m === null) return undefined;
  const index = Number(m[1]);
  const ids = d.workerThreadIdsForTest();
  if (ids.length === 0) throw new HookRefusal(409, 'no worker threads: start the daemon with --workers N (N >= 2)');
  if (index >= ids.length) throw new HookRefusal(404, `no worker ${index}: workers are 0..${ids.length - 1}`);
  if (ids[index] === null) throw new HookRefusal(409, `worker ${index} is not running (restarting): try again`);
  d.exitWorkerForTest(index);
  return { worker: index, threadId: ids[index], exiting: true };
}
