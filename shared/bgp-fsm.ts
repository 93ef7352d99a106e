// The BGP session's finite state machine (RFC 4271 8) as a pure function:
//   stepBgpFsm(fsm, event) -> { next, actions, reason }
// Timers are events (ConnectRetryTimer_Expires, HoldTimer_Expires, KeepaliveTimer_Expires,
// IdleHoldTimer_Expires); what the runtime must do is a list of actions (connect, send OPEN, start a
// timer, drop the connection ...). The speaker runtime (mux/bgp/speaker.ts) owns the socket and the
// timers and feeds every event through here, so every transition is table-tested (test/bgp-fsm.test.ts).
//
// slbx's speaker is always the active side toward a passive router, so a few optional parts of RFC 4271
// 8 are not there: no listening socket (no TcpConnectionConfirmed from an incoming connection, no
// connection collision), no DelayOpen, no passive start. Deviations and choices, each the RFC's own
// optional behaviour or the simplest one that fits an active-only speaker:
//   * Connect + TcpConnectionFails -> Active, ConnectRetryTimer set to the back-off; Active +
//     ConnectRetryTimer_Expires -> Connect (a new attempt). This is the RFC's Active state doing its
//     job for a speaker that does not listen.
//   * Any error after the connection was up -> Idle, and the IdleHoldTimer (RFC 4271 8.1.1,
//     DampPeerOscillations) restarts the session with AutomaticStart when it expires.
//   * The back-off (ConnectRetryTimer in Active, IdleHoldTimer in Idle) doubles from backoffMinMs to
//     backoffMaxMs on each failure and goes back to backoffMinMs when the session is Established.
//   * ManualStop in OpenSent, OpenConfirm or Established sends Cease / Administrative Shutdown
//     (RFC 4486) with a shutdown communication (RFC 9003).
//   * Unexpected messages send the FSM Error subcodes of RFC 6608.
import {
  BGP_CEASE_ADMIN_SHUTDOWN,
  BGP_CEASE_BFD_DOWN,
  BGP_ERROR_CEASE,
  BGP_ERROR_FSM,
  BGP_ERROR_HOLD_TIMER,
  BGP_FSM_UNEXPECTED_IN_ESTABLISHED,
  BGP_FSM_UNEXPECTED_IN_OPENCONFIRM,
  BGP_FSM_UNEXPECTED_IN_OPENSENT,
  bgpErrorNotification,
  bgpShutdownData,
} from './bgp-message.js';

export const BGP_STATES = ['Idle', 'Connect', 'Active', 'OpenSent', 'OpenConfirm', 'Established'] as const;
export type BgpState = (typeof BGP_STATES)[number];

export type BgpTimer = 'connectRetry' | 'hold' | 'keepalive' | 'idleHold';
export const BGP_TIMERS: readonly BgpTimer[] = ['connectRetry', 'hold', 'keepalive', 'idleHold'];

/** RFC 4271 8.2.2: the hold time while waiting for the peer's OPEN ("a large value; 4 minutes is suggested"). */
export const BGP_OPEN_HOLD_TIME_MS = 240_000;

export interface BgpFsmConfig {
  /** Our hold time, proposed in our OPEN (0 or >= 3 s). */
  readonly holdTimeS: number;
  /** Our keepalive interval; the one used is min(this, negotiated hold time / 3). */
  readonly keepaliveS: number;
  /** How long one TCP connect may take before a new attempt (the ConnectRetryTimer in Connect). */
  readonly connectRetryMs: number;
  /** Reconnect back-off, doubling from min to max. */
  readonly backoffMinMs: number;
  readonly backoffMaxMs: number;
  /** The shutdown communication sent with Cease / Administrative Shutdown (RFC 9003). */
  readonly shutdownMessage: string;
}

export interface BgpFsm {
  readonly state: BgpState;
  readonly config: BgpFsmConfig;
  /** RFC 4271 8.1: failures since the last ManualStart. */
  readonly connectRetryCounter: number;
  /** The next back-off delay. */
  readonly backoffMs: number;
  /** After ManualStop: AutomaticStart and IdleHoldTimer_Expires are ignored until ManualStart. */
  readonly stopped: boolean;
  /** Negotiated hold time (s), set when the peer's OPEN arrives; 0 = no hold timer and no keepalives. */
  readonly holdTimeS: number;
  /** Keepalive interval in use (ms); 0 = none. */
  readonly keepaliveMs: number;
}

export type BgpEvent =
  | { readonly type: 'ManualStart' }
  | { readonly type: 'ManualStop' }
  | { readonly type: 'AutomaticStart' }
  | { readonly type: 'ConnectRetryTimerExpires' }
  | { readonly type: 'HoldTimerExpires' }
  | { readonly type: 'KeepaliveTimerExpires' }
  | { readonly type: 'IdleHoldTimerExpires' }
  /** Our outgoing TCP connection is up (RFC event 16, Tcp_CR_Acked). */
  | { readonly type: 'TcpConnectionAcked' }
  | { readonly type: 'TcpConnectionFails' }
  /** A valid OPEN (parsed and checked); peerHoldTimeS is the peer's proposal. */
  | { readonly type: 'BgpOpen'; readonly peerHoldTimeS: number }
  /** error: a negative BGP error code (bgp-message.ts); data: the NOTIFICATION's data. */
  | { readonly type: 'BgpHeaderErr'; readonly error: number; readonly data: Uint8Array }
  | { readonly type: 'BgpOpenMsgErr'; readonly error: number; readonly data: Uint8Array }
  | { readonly type: 'NotifMsg'; readonly code: number; readonly subcode: number }
  | { readonly type: 'KeepAliveMsg' }
  | { readonly type: 'UpdateMsg' }
  | { readonly type: 'UpdateMsgErr'; readonly error: number; readonly data: Uint8Array }
  /** The BFD session to the peer went down (RFC 5882: the client takes its session down). */
  | { readonly type: 'BfdDown' };

export type BgpAction =
  | { readonly type: 'connect' }
  | { readonly type: 'drop' }
  | { readonly type: 'sendOpen' }
  | { readonly type: 'sendKeepalive' }
  | { readonly type: 'sendNotification'; readonly code: number; readonly subcode: number; readonly data: Uint8Array }
  | { readonly type: 'startTimer'; readonly timer: BgpTimer; readonly ms: number }
  | { readonly type: 'stopTimer'; readonly timer: BgpTimer }
  /** The session reached Established: announce. */
  | { readonly type: 'established' }
  /** The session left Established: everything learned and announced on it is gone. */
  | { readonly type: 'down' };

export interface BgpStep {
  readonly next: BgpFsm;
  readonly actions: readonly BgpAction[];
  /** Why, in snake_case: 'tcp_connected', 'hold_timer_expired', 'notification_received' ... */
  readonly reason: string;
}

export function newBgpFsm(config: BgpFsmConfig): BgpFsm {
  return { state: 'Idle', config, connectRetryCounter: 0, backoffMs: config.backoffMinMs, stopped: true, holdTimeS: 0, keepaliveMs: 0 };
}

/** The keepalive interval for a negotiated hold time (RFC 4271 10: a third of it at most). */
export function bgpKeepaliveMs(config: BgpFsmConfig, holdTimeS: number): number {
  if (holdTimeS === 0) return 0;
  return Math.max(1, Math.min(config.keepaliveS * 1000, Math.floor((holdTimeS * 1000) / 3)));
}

const stopAll: BgpAction[] = BGP_TIMERS.map((timer) => ({ type: 'stopTimer', timer }));
const start = (timer: BgpTimer, ms: number): BgpAction => ({ type: 'startTimer', timer, ms });
const stop = (timer: BgpTimer): BgpAction => ({ type: 'stopTimer', timer });
const notify = (code: number, subcode: number, data: Uint8Array = new Uint8Array(0)): BgpAction => ({
  type: 'sendNotification',
  code,
  subcode,
  data,
});
const DROP: BgpAction = { type: 'drop' };

function grow(f: BgpFsm): number {
  return Math.min(f.config.backoffMaxMs, f.backoffMs * 2);
}

/** To Idle after a failure: drop, stop every timer, count it, restart after the back-off. */
function fail(f: BgpFsm, reason: string, first: BgpAction[] = []): BgpStep {
  const wasUp = f.state === 'Established';
  const actions: BgpAction[] = [
    ...first,
    DROP,
    ...stopAll,
    ...(wasUp ? [{ type: 'down' } as BgpAction] : []),
    start('idleHold', f.backoffMs),
  ];
  return {
    next: { ...f, state: 'Idle', connectRetryCounter: f.connectRetryCounter + 1, backoffMs: grow(f), holdTimeS: 0, keepaliveMs: 0 },
    actions,
    reason,
  };
}

/** ManualStop: Cease / Administrative Shutdown when the peer can hear it, then Idle until ManualStart. */
function manualStop(f: BgpFsm): BgpStep {
  const connected = f.state === 'OpenSent' || f.state === 'OpenConfirm' || f.state === 'Established';
  const actions: BgpAction[] = [];
  if (connected) actions.push(notify(BGP_ERROR_CEASE, BGP_CEASE_ADMIN_SHUTDOWN, bgpShutdownData(f.config.shutdownMessage)));
  if (f.state !== 'Idle') actions.push(DROP);
  actions.push(...stopAll);
  if (f.state === 'Established') actions.push({ type: 'down' });
  return {
    next: { ...f, state: 'Idle', stopped: true, connectRetryCounter: 0, backoffMs: f.config.backoffMinMs, holdTimeS: 0, keepaliveMs: 0 },
    actions,
    reason: 'manual_stop',
  };
}

function errorAction(error: number, data: Uint8Array): BgpAction[] {
  const n = bgpErrorNotification(error);
  return n === null ? [] : [notify(n.code, n.subcode, data)];
}

const UNEXPECTED: Partial<Record<BgpState, number>> = {
  OpenSent: BGP_FSM_UNEXPECTED_IN_OPENSENT,
  OpenConfirm: BGP_FSM_UNEXPECTED_IN_OPENCONFIRM,
  Established: BGP_FSM_UNEXPECTED_IN_ESTABLISHED,
};

const reasonOf: Record<BgpEvent['type'], string> = {
  ManualStart: 'manual_start',
  ManualStop: 'manual_stop',
  AutomaticStart: 'automatic_start',
  ConnectRetryTimerExpires: 'connect_retry_timer_expired',
  HoldTimerExpires: 'hold_timer_expired',
  KeepaliveTimerExpires: 'keepalive_timer_expired',
  IdleHoldTimerExpires: 'idle_hold_timer_expired',
  TcpConnectionAcked: 'tcp_connected',
  TcpConnectionFails: 'tcp_connection_failed',
  BgpOpen: 'open_received',
  BgpHeaderErr: 'message_header_error',
  BgpOpenMsgErr: 'open_message_error',
  NotifMsg: 'notification_received',
  KeepAliveMsg: 'keepalive_received',
  UpdateMsg: 'update_received',
  UpdateMsgErr: 'update_message_error',
  BfdDown: 'bfd_down',
};

/** One step of the FSM. Never throws; an event a state does not expect is handled as RFC 4271 8.2.2 says. */
export function stepBgpFsm(f: BgpFsm, e: BgpEvent): BgpStep {
  const reason = reasonOf[e.type];
  const same = (actions: BgpAction[] = [], why = reason): BgpStep => ({ next: f, actions, reason: why });
  if (e.type === 'ManualStop') return manualStop(f);
  if (e.type === 'BfdDown') {
    // RFC 9384: Cease / BFD Down when the peer can hear it; nothing to take down before that
    if (f.state === 'OpenSent' || f.state === 'OpenConfirm' || f.state === 'Established')
      return fail(f, reason, [notify(BGP_ERROR_CEASE, BGP_CEASE_BFD_DOWN)]);
    return same([], `${reason}_ignored`);
  }
  const cfg = f.config;
  const connectNow = (next: Partial<BgpFsm>): BgpStep => ({
    next: { ...f, ...next, state: 'Connect' },
    actions: [stop('idleHold'), start('connectRetry', cfg.connectRetryMs), { type: 'connect' }],
    reason,
  });

  switch (f.state) {
    case 'Idle':
      if (e.type === 'ManualStart') return connectNow({ stopped: false, connectRetryCounter: 0, backoffMs: cfg.backoffMinMs });
      if ((e.type === 'AutomaticStart' || e.type === 'IdleHoldTimerExpires') && !f.stopped) return connectNow({});
      return same([], `${reason}_ignored_in_idle`); // RFC 4271 8.2.2: other events are ignored in Idle

    case 'Connect':
    case 'Active':
      switch (e.type) {
        case 'ManualStart':
        case 'AutomaticStart':
          return same([], `${reason}_ignored`);
        case 'ConnectRetryTimerExpires':
          // Connect: the attempt took too long, start over; Active: the back-off is over, try again
          return {
            next: { ...f, state: 'Connect' },
            actions: [...(f.state === 'Connect' ? [DROP] : []), start('connectRetry', cfg.connectRetryMs), { type: 'connect' }],
            reason,
          };
        case 'TcpConnectionAcked':
          return {
            next: { ...f, state: 'OpenSent' },
            actions: [stop('connectRetry'), { type: 'sendOpen' }, start('hold', BGP_OPEN_HOLD_TIME_MS)],
            reason,
          };
        case 'TcpConnectionFails':
          if (f.state === 'Connect') {
            return {
              next: { ...f, state: 'Active', connectRetryCounter: f.connectRetryCounter + 1, backoffMs: grow(f) },
              actions: [DROP, start('connectRetry', f.backoffMs)],
              reason,
            };
          }
          return fail(f, reason);
        default:
          return fail(f, `${reason}_unexpected_in_${f.state.toLowerCase()}`);
      }

    case 'OpenSent':
      switch (e.type) {
        case 'ManualStart':
        case 'AutomaticStart':
          return same([], `${reason}_ignored`);
        case 'BgpOpen': {
          const hold = Math.min(cfg.holdTimeS, e.peerHoldTimeS);
          const ka = bgpKeepaliveMs(cfg, hold);
          return {
            next: { ...f, state: 'OpenConfirm', holdTimeS: hold, keepaliveMs: ka },
            actions: [
              stop('connectRetry'),
              { type: 'sendKeepalive' },
              ...(hold > 0 ? [start('hold', hold * 1000), start('keepalive', ka)] : [stop('hold')]),
            ],
            reason,
          };
        }
        case 'TcpConnectionFails':
          // RFC 4271 8.2.2: close, restart the ConnectRetryTimer, Active
          return {
            next: {
              ...f,
              state: 'Active',
              connectRetryCounter: f.connectRetryCounter + 1,
              backoffMs: grow(f),
              holdTimeS: 0,
              keepaliveMs: 0,
            },
            actions: [DROP, ...stopAll, start('connectRetry', f.backoffMs)],
            reason,
          };
        case 'HoldTimerExpires':
          return fail(f, reason, [notify(BGP_ERROR_HOLD_TIMER, 0)]);
        case 'BgpHeaderErr':
        case 'BgpOpenMsgErr':
          return fail(f, reason, errorAction(e.error, e.data));
        case 'NotifMsg':
          return fail(f, reason);
        default:
          return fail(f, `${reason}_unexpected_in_opensent`, [notify(BGP_ERROR_FSM, UNEXPECTED.OpenSent!)]);
      }

    case 'OpenConfirm':
      switch (e.type) {
        case 'ManualStart':
        case 'AutomaticStart':
          return same([], `${reason}_ignored`);
        case 'KeepAliveMsg':
          return {
            next: { ...f, state: 'Established', backoffMs: cfg.backoffMinMs },
            actions: [...(f.holdTimeS > 0 ? [start('hold', f.holdTimeS * 1000)] : []), { type: 'established' }],
            reason,
          };
        case 'KeepaliveTimerExpires':
          return same([{ type: 'sendKeepalive' }, start('keepalive', f.keepaliveMs)]);
        case 'HoldTimerExpires':
          return fail(f, reason, [notify(BGP_ERROR_HOLD_TIMER, 0)]);
        case 'TcpConnectionFails':
        case 'NotifMsg':
          return fail(f, reason);
        case 'BgpHeaderErr':
        case 'BgpOpenMsgErr':
          return fail(f, reason, errorAction(e.error, e.data));
        default:
          return fail(f, `${reason}_unexpected_in_openconfirm`, [notify(BGP_ERROR_FSM, UNEXPECTED.OpenConfirm!)]);
      }

    case 'Established':
      switch (e.type) {
        case 'ManualStart':
        case 'AutomaticStart':
          return same([], `${reason}_ignored`);
        case 'KeepAliveMsg':
        case 'UpdateMsg':
          return same(f.holdTimeS > 0 ? [start('hold', f.holdTimeS * 1000)] : []);
        case 'KeepaliveTimerExpires':
          return same([{ type: 'sendKeepalive' }, start('keepalive', f.keepaliveMs)]);
        case 'HoldTimerExpires':
          return fail(f, reason, [notify(BGP_ERROR_HOLD_TIMER, 0)]);
        case 'TcpConnectionFails':
        case 'NotifMsg':
          return fail(f, reason);
        case 'BgpHeaderErr':
        case 'BgpOpenMsgErr':
        case 'UpdateMsgErr':
          return fail(f, reason, errorAction(e.error, e.data));
        default:
          return fail(f, `${reason}_unexpected_in_established`, [notify(BGP_ERROR_FSM, UNEXPECTED.Established!)]);
      }
  }
}
