/** The wire form of one log line, shared by the page and stream routes of build and runtime logs. */
import { z } from "@hono/zod-openapi";
import { LOG_STREAMS } from "../../shared/db/schema";
import type { LogLineRow } from "./store";

export const LogLineSchema = z
  .object({
    id: z.string().openapi({
      description: "The line's sequence number in its project, as a decimal string: increasing, the SSE `id:` and the value to resume after",
      example: "1024",
    }),
    timestamp: z.string().openapi({ description: "When the line was written (ISO 8601)" }),
    deploymentId: z
      .string()
      .nullable()
      .openapi({ description: "The deployment that wrote it (null: not tied to one)", example: "dpl_01hx2k3m4n5p6q7r8s9t0va1b2" }),
    environment: z.string().nullable().openapi({
      description:
        "The name of that deployment's environment (`production`, or a preview's name such as `preview-x`): tells apart lines of several environments of the project read together; null when the line is not tied to a deployment",
      example: "production",
    }),
    stream: z.enum(LOG_STREAMS).openapi({ description: "`stdout` / `stderr` of the build or app; `system`: the runner's own lines (steps, exits, restarts)" }),
    message: z.string().openapi({
      description: "The line as sent (ANSI escapes kept), without its newline; a line over 16 KiB is cut there and ends with ` … [line truncated]`",
    }),
  })
  .openapi("LogLine");

export type LogLine = z.infer<typeof LogLineSchema>;

/** The wire form of a row; `environment` is the name of its deployment's environment (environment-names.ts reads it). */
export function logLineView(row: LogLineRow, environment: string | null): LogLine {
  return { id: String(row.seq), timestamp: row.at.toISOString(), deploymentId: row.deploymentId, environment, stream: row.stream, message: row.message };
}

/** A page of lines and the cursor of the next one (null: no more). */
export const LogPageSchema = z
  .object({
    items: z.array(LogLineSchema),
    nextCursor: z.string().nullable().openapi({ description: "Pass as `cursor` for the next page; null when there is none" }),
  })
  .openapi("LogLinePage");

/** The runtime page: a `q` search may stop at its budget (store.ts, logSearchSettings) and say so. */
export const RuntimeLogPageSchema = LogPageSchema.extend({
  nextCursor: z.string().nullable().openapi({
    description:
      "Pass as `cursor` for the next (older) page; null when no older line matches. After a partial search: the line number the search stopped at (the lines before it are not searched yet)",
  }),
  partial: z.boolean().openapi({
    description:
      "True when a `q` search stopped at its time or line budget before filling the page: `items` holds every match from `nextCursor` up, and the search goes on with `cursor=nextCursor`. Always false without `q`",
  }),
}).openapi("RuntimeLogPage");
