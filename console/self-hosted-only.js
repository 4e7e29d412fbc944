// @ts-check
/**
 * Features only a self-hosted server offers (route rules; server logs where the edge is not
 * this server's): on another server their routes are unknown, and the API's 404 for an unknown
 * route (`No route for GET /api/…`) is told apart from a missing project's, so the page can say
 * so in a sentence instead of showing an error.
 */
import { ApiError } from "./api.js";

/** Whether `error` is the API's answer for a route this server does not have. @param {unknown} error */
export function isUnknownRoute(error) {
  return error instanceof ApiError && error.status === 404 && /^No route for /.test(error.problem.detail ?? "");
}
