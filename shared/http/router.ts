import { OpenAPIHono } from "@hono/zod-openapi";
import type { AppContext, AppEnv, Caller } from "./context";
import { validationHook } from "./validation";

/** Every resource group's router: validation failures become 400 problems. */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
}

/** The (organization, user) that owns per-user rows: settings, channels, subscriptions, deliveries. */
export function ownerOf(c: AppContext): { orgId: string; userId: string } {
  const { orgId, userId } = callerOf(c);
  return { orgId, userId };
}

/** The caller of a guarded route (the guard has run, so it is set). */
export function callerOf(c: AppContext): Caller & { orgId: string } {
  const caller = c.get("caller");
  if (!caller) throw new Error("callerOf used on a route without a guard");
  return caller as Caller & { orgId: string };
}
