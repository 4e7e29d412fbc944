/**
 * One self-hosted server's metrics: the process's (process-metrics.ts, request
 * counts included) and its database's (database.ts, scrape-queries.ts), rendered
 * in the Prometheus text format for GET /metrics. Who may read them is
 * settings.ts's METRICS_BIND and METRICS_TOKEN.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { PGlite } from "@electric-sql/pglite";
import type pg from "pg";
import { Registry } from "prom-client";
import type { Db } from "../../../shared/db/types";
import { instrumentDatabase } from "./database";
import { processRegistry } from "./process-metrics";
import { registerScrapeQueries } from "./scrape-queries";
import type { MetricsSettings } from "./settings";

export interface Metrics {
  /** The exposition and its content type. */
  render(): Promise<{ contentType: string; body: string }>;
  /** Whether a scrape with this Authorization header may read them: always without METRICS_TOKEN, else `Bearer <token>` only. */
  authorized(authorization: string | undefined): boolean;
}

const digest = (s: string) => createHash("sha256").update(s).digest();

export function createMetrics(opts: { db: Db; database: { pool?: pg.Pool; client?: PGlite }; settings: MetricsSettings }): Metrics {
  const own = new Registry();
  instrumentDatabase(opts.database, own);
  registerScrapeQueries(opts.db, own);
  const registry = Registry.merge([processRegistry, own]);
  const expected = opts.settings.token === undefined ? undefined : digest(`Bearer ${opts.settings.token}`);
  return {
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
    authorized(authorization) {
      if (!expected) return true;
      // Compared as digests: equal lengths, and no timing on how much of the token matched.
      return authorization !== undefined && timingSafeEqual(digest(authorization.trim()), expected);
    },
  };
}
