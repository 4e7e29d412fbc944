/**
 * What the database knows, read when Prometheus scrapes rather than counted
 * where it happens: a few aggregate queries per scrape, all of them on indexes
 * (the outbox's due index, primary-key ranges of time-ordered ids) except the
 * deployments' status count, run at once under SCRAPE_DEADLINE_MS. A slow or
 * unreachable database does not hang the scrape: the database's gauges are left
 * out of that answer and `wsp_metrics_database_up` is 0.
 *
 * The two counters (delivery attempts, finished builds) read the rows added
 * since the previous scrape by their ids, which sort by creation time
 * (shared/ids.ts): each scrape reads ids from the last one up to SETTLE_MS ago
 * (a transaction still open may yet commit a row with an older id), so every
 * row is counted once, by the process that scraped, from its start on, as a
 * Prometheus counter is (a restart starts it again at 0).
 */
import { and, count, eq, gt, inArray, isNotNull, isNull, lt, sql } from "drizzle-orm";
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { CHANNEL_KINDS, DEPLOYMENT_STATUSES, deployments, deploymentTransitions, notificationAttempts, notificationOutbox } from "../../../shared/db/schema";
import type { Db } from "../../../shared/db/types";
import { newId } from "../../../shared/ids";
import { withDeadline } from "../../../shared/deadline";

/** How long one scrape's queries may take together. */
export const SCRAPE_DEADLINE_MS = 2_000;
/** Rows younger than this are left to the next scrape (their transaction may still be open). */
export const SETTLE_MS = 5_000;
/** Finished builds read per scrape at most (the rest on the next one). */
const MAX_BUILDS_PER_SCRAPE = 10_000;

/** The smallest id of `prefix` made at `ms`: ids below it were made before. */
const idAt = (prefix: string, ms: number) => newId(prefix, ms).slice(0, prefix.length + 11);

/** Registers the database's gauges and counters on `registry`; `db` is read at each scrape. */
export function registerScrapeQueries(db: Db, registry: Registry, opts: { deadlineMs?: number; now?: () => number } = {}): void {
  const now = opts.now ?? Date.now;
  const deadlineMs = opts.deadlineMs ?? SCRAPE_DEADLINE_MS;
  // Counted from this process's start.
  let attemptsFrom = idAt("natt", now());
  let buildsFrom = idAt("dtr", now());

  const up = new Gauge({
    name: "wsp_metrics_database_up",
    help: "1 when this scrape's database queries answered within the deadline, else 0 (the database's metrics are then missing from this answer).",
    registers: [registry],
    collect: scrape,
  });
  const states = new Gauge({
    name: "wsp_deployments",
    help: "Deployments by status (queued, building, deploying, ready, failed, canceled).",
    labelNames: ["status"] as const,
    registers: [registry],
    collect: scrape,
  });
  const apps = new Gauge({
    name: "wsp_apps_running",
    help: "Apps running now: ready deployments a runner serves on a port (not crashed, not asleep).",
    registers: [registry],
    collect: scrape,
  });
  const outbox = new Gauge({
    name: "wsp_outbox_sends",
    help: "Notification sends waiting in the outbox (pending: due or retrying later; sending: leased by a sender), by status and channel kind.",
    labelNames: ["status", "kind"] as const,
    registers: [registry],
    collect: scrape,
  });
  const attempts = new Counter({
    name: "wsp_notification_delivery_attempts_total",
    help: "Notification delivery attempts recorded since this process started, by channel kind and outcome (delivered, retry, failed).",
    labelNames: ["kind", "outcome"] as const,
    registers: [registry],
    collect: scrape,
  });
  const builds = new Histogram({
    name: "wsp_build_duration_seconds",
    help: "Builds finished since this process started: from `building` to ready or failed (source, install, build, start and the smoke window), by result.",
    labelNames: ["result"] as const,
    buckets: [5, 10, 20, 30, 60, 120, 300, 600, 900, 1800, 3600],
    registers: [registry],
    collect: scrape,
  });

  async function read() {
    const until = now() - SETTLE_MS;
    const attemptsTo = idAt("natt", until);
    const buildsTo = idAt("dtr", until);
    const building = sql`(select min(b.at) from ${deploymentTransitions} b where b.deployment_id = ${deploymentTransitions.deploymentId} and b.status = 'building')`;
    const [byStatus, [running], sends, attempted, finished] = await Promise.all([
      db.select({ status: deployments.status, n: count() }).from(deployments).groupBy(deployments.status),
      db
        .select({ n: count() })
        .from(deployments)
        .where(and(eq(deployments.status, "ready"), isNotNull(deployments.port), isNull(deployments.crashedAt), isNull(deployments.asleepAt))),
      db
        .select({ status: notificationOutbox.status, kind: notificationOutbox.kind, n: count() })
        .from(notificationOutbox)
        .where(inArray(notificationOutbox.status, ["pending", "sending"]))
        .groupBy(notificationOutbox.status, notificationOutbox.kind),
      db
        .select({ kind: notificationOutbox.kind, outcome: notificationAttempts.outcome, n: count() })
        .from(notificationAttempts)
        .innerJoin(notificationOutbox, eq(notificationOutbox.id, notificationAttempts.outboxId))
        .where(and(gt(notificationAttempts.id, attemptsFrom), lt(notificationAttempts.id, attemptsTo)))
        .groupBy(notificationOutbox.kind, notificationAttempts.outcome),
      db
        .select({
          id: deploymentTransitions.id,
          status: deploymentTransitions.status,
          seconds: sql<number>`extract(epoch from ${deploymentTransitions.at} - ${building})`.mapWith(Number),
        })
        .from(deploymentTransitions)
        .where(
          and(gt(deploymentTransitions.id, buildsFrom), lt(deploymentTransitions.id, buildsTo), inArray(deploymentTransitions.status, ["ready", "failed"])),
        )
        .orderBy(deploymentTransitions.id)
        .limit(MAX_BUILDS_PER_SCRAPE),
    ]);
    return { byStatus, running: running?.n ?? 0, sends, attempted, finished, attemptsTo, buildsTo };
  }

  let inFlight: Promise<void> | undefined;
  /** One read per scrape: every collect() of the scrape waits for the same one. */
  function scrape(): Promise<void> {
    inFlight ??= (async () => {
      try {
        const r = await withDeadline(read(), deadlineMs);
        // Every status and kind is shown, 0 included: an absent series would read as unknown.
        for (const status of DEPLOYMENT_STATUSES) states.set({ status }, 0);
        for (const row of r.byStatus) states.set({ status: row.status }, row.n);
        apps.set(r.running);
        for (const status of ["pending", "sending"]) for (const kind of CHANNEL_KINDS) outbox.set({ status, kind }, 0);
        for (const row of r.sends) outbox.set({ status: row.status, kind: row.kind }, row.n);
        for (const row of r.attempted) attempts.inc({ kind: row.kind, outcome: row.outcome }, row.n);
        attemptsFrom = r.attemptsTo;
        for (const row of r.finished) if (Number.isFinite(row.seconds) && row.seconds >= 0) builds.observe({ result: row.status }, row.seconds);
        // A full page: the rest from its last row on, next time.
        buildsFrom = r.finished.length === MAX_BUILDS_PER_SCRAPE ? r.finished.at(-1)!.id : r.buildsTo;
        up.set(1);
      } catch {
        // Gauges that could not be read are left out rather than shown stale; the counters keep their totals.
        states.reset();
        apps.reset();
        outbox.reset();
        up.set(0);
      }
    })().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  }
}
