/**
 * Wakes log streams when lines were stored. In one process (PGlite, or one
 * adapter on Postgres) the writer's `notify` wakes waiting streams at once;
 * streams also poll (see sse.ts), which covers lines written by another process
 * and the Worker, where no writer runs. Keyed by project id.
 */
import { createWakeFeed, type WakeFeed } from "../wake-feed";

export type LogFeed = WakeFeed;
export const createLogFeed = createWakeFeed;
