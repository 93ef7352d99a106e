// The controller's API token: a shared secret in a file readable only by root. Changing state through
// the API, and every agent endpoint (policy watch, acks, heartbeats, health reports), needs it as
// `Authorization: Bearer <token>`; reading the desired state does not. The controller signs each policy
// it sends with an HMAC of the body under the same token (`slbx-signature: hmac-sha256=<hex>`), and an
// agent that has the token takes policy only with a good signature: policy comes from the controller
// and from nothing else that can reach the agent or sit between them.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { closeSync, existsSync, fstatSync, openSync, readFileSync, writeSync, fsyncSync } from 'node:fs';

export const SIGNATURE_HEADER = 'slbx-signature';
const TOKEN_RE = /^[0-9a-f]{64}$/;

/** Reads the token file; an error message when it is missing, malformed or readable by others. */
export function readToken(path: string): string | { error: string } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    return { error: `cannot read the API token ${path}: ${(e as Error).message}` };
  }
  try {
    const mode = fstatSync(fd).mode & 0o777;
    if ((mode & 0o077) !== 0) return { error: `the API token ${path} is readable by others (mode ${mode.toString(8)}); chmod 600 it` };
    const t = readFileSync(fd, 'utf8').trim();
    if (!TOKEN_RE.test(t)) return { error: `the API token ${path} is not 64 hex digits` };
    return t;
  } finally {
    closeSync(fd);
  }
}

/** The token in `path`, made (32 random bytes, mode 0600, created exclusively) when there is none. */
export function loadOrCreateToken(path: string): string | { error: string } {
  if (!existsSync(path)) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, `${randomBytes(32).toString('hex')}\n`);
      fsyncSync(fd);
      closeSync(fd);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return { error: `cannot create the API token ${path}: ${(e as Error).message}` };
    }
  }
  return readToken(path);
}

/** True when an Authorization header carries the token (compared in constant time). */
export function authorized(header: string | string[] | undefined, token: string): boolean {
  if (typeof header !== 'string' || !header.startsWith('Bearer ')) return false;
  const given = Buffer.from(header.slice(7).trim());
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

export function sign(token: string, body: Buffer | string): string {
  return `hmac-sha256=${createHmac('sha256', token).update(body).digest('hex')}`;
}

export function signatureValid(token: string, body: Buffer | string, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const want = Buffer.from(sign(token, body));
  const given = Buffer.from(header.trim());
  return given.length === want.length && timingSafeEqual(given, want);
}
