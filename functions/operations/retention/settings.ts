/**
 * How long each kind of row is kept (issue 24, "retention everywhere"). Each
 * bound has its own setting, read from the environment on the self-hosted
 * adapter and from vars on the Worker; docs/operating.md has the table. Rows
 * whose end is fixed by what they are (a rate-limit window past its end, an
 * expired sign-in code or session, an idempotency key after its 24 hours) have
 * no setting: keeping them longer would change nothing but the table's size.
 */

export interface LogCaps {
  build: number;
  runtime: number;
  request: number;
}

export interface RetentionSettings {
  /** LOG_RETENTION_DAYS: log lines of every kind older than this go. */
  logDays: number;
  /** LOG_RETENTION_BUILD_LINES, …_RUNTIME_LINES, …_REQUEST_LINES: the newest lines kept per project, per kind. */
  logLines: LogCaps;
  /** NOTIFICATION_EVENT_RETENTION_DAYS: an event no feed entry or send refers to any more goes after this. */
  notificationEventDays: number;
  /** NOTIFICATION_FEED_RETENTION_DAYS: in-app feed entries (and their finished sends) older than this go. */
  feedDays: number;
  /** NOTIFICATION_OUTBOX_RETENTION_DAYS: finished sends (delivered, failed, cancelled) go this long after they finished. */
  outboxDays: number;
  /** NOTIFICATION_ATTEMPT_RETENTION_DAYS: delivery attempts older than this go. */
  attemptDays: number;
  /** NOTIFICATION_SEND_MAX_AGE_DAYS: a send still waiting (deferred by a rate limit, retried) this long after it was queued is given up (failed). */
  sendMaxAgeDays: number;
  /** AUDIT_RETENTION_DAYS: audit rows older than this go. */
  auditDays: number;
}

export const DEFAULT_LOG_LINES = 50_000;

export const DEFAULT_RETENTION: RetentionSettings = {
  logDays: 30,
  logLines: { build: DEFAULT_LOG_LINES, runtime: DEFAULT_LOG_LINES, request: DEFAULT_LOG_LINES },
  notificationEventDays: 90,
  feedDays: 90,
  outboxDays: 30,
  attemptDays: 30,
  sendMaxAgeDays: 7,
  auditDays: 365,
};

function boundedInt(env: Record<string, unknown>, name: string, fallback: number, lo: number, hi: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < lo || n > hi) throw new Error(`Invalid configuration ${name}: an integer in [${lo}, ${hi}], got '${String(raw)}'`);
  return n;
}

const days = (env: Record<string, unknown>, name: string, fallback: number) => boundedInt(env, name, fallback, 1, 36_500);
const lines = (env: Record<string, unknown>, name: string, fallback: number) => boundedInt(env, name, fallback, 100, 10_000_000);

/**
 * The settings from the environment; unset: the defaults; out of range: an error
 * naming the variable. LOG_RETENTION_LINES, the earlier per-project cap, is now
 * the default of each kind's cap (it no longer counts the kinds together, so a
 * busy site's request lines cannot push its build logs out).
 */
export function retentionFromEnv(env: Record<string, unknown>): RetentionSettings {
  const d = DEFAULT_RETENTION;
  const perKind = lines(env, "LOG_RETENTION_LINES", DEFAULT_LOG_LINES);
  return {
    logDays: days(env, "LOG_RETENTION_DAYS", d.logDays),
    logLines: {
      build: lines(env, "LOG_RETENTION_BUILD_LINES", perKind),
      runtime: lines(env, "LOG_RETENTION_RUNTIME_LINES", perKind),
      request: lines(env, "LOG_RETENTION_REQUEST_LINES", perKind),
    },
    notificationEventDays: days(env, "NOTIFICATION_EVENT_RETENTION_DAYS", d.notificationEventDays),
    feedDays: days(env, "NOTIFICATION_FEED_RETENTION_DAYS", d.feedDays),
    outboxDays: days(env, "NOTIFICATION_OUTBOX_RETENTION_DAYS", d.outboxDays),
    attemptDays: days(env, "NOTIFICATION_ATTEMPT_RETENTION_DAYS", d.attemptDays),
    sendMaxAgeDays: days(env, "NOTIFICATION_SEND_MAX_AGE_DAYS", d.sendMaxAgeDays),
    auditDays: days(env, "AUDIT_RETENTION_DAYS", d.auditDays),
  };
}
