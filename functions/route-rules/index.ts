/** Route rules (self-hosted only): mounted by the Node adapter. */
export { routeRulesRouter } from "./routes";
