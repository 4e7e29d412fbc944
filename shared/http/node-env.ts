/**
 * The Node request and response behind a request that came through the Node adapter (@hono/node-server passes
 * them as the env); undefined on the Worker and for an in-process call. Type imports only: the Worker bundles
 * this module too.
 */
import type { Context } from "hono";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AppEnv } from "./context";

export const nodeEnv = (c: Context<AppEnv>) => c.env as { incoming?: IncomingMessage; outgoing?: ServerResponse } | undefined;
