/**
 * Where a Node response that writes `x-request-id` with its head (functions/self-hosted/request-id-response.ts)
 * takes the request's id from: functions/app.ts sets it there when the response has the slot. Shared (not
 * Node-only) so that the app, which the Worker runs too, names it without importing node:http.
 */
export const REQUEST_ID_SLOT: unique symbol = Symbol("x-request-id");
