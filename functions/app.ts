/**
 * `createApp(deps)`: the only place routes are assembled. The Worker and the
 * Node adapter build `deps` differently (database driver, keyring, mode) and
 * pass them in; handlers reach every service through `c.get` (the few-routes
 * ones through `c.get("services")`).
 */
import { OpenAPIHono } from "@hono/zod-openapi";
import type { Context, Next } from "hono";
import { HTTPException } from "hono/http-exception";
import type { AppEnv, RequestServices, RouteServices } from "../shared/http/context";
import { describeError } from "../shared/http/error-log";
import { ApiError } from "../shared/http/errors";
import { jsonLogger, type Logger } from "../shared/http/logger";
import { newId } from "../shared/ids";
import { nodeEnv } from "../shared/http/node-env";
import { REQUEST_ID_SLOT } from "../shared/http/request-id";
import { serveOpenApiDocument } from "../shared/http/openapi-document";
import { createFetchOutbound } from "../shared/outbound/fetch";
import { createGuardedGitFetch } from "../shared/git/fetch";
import { DEFAULT_GIT_HOSTS } from "../shared/git/hosts";
import { validationHook } from "../shared/http/validation";
import { CachedTrieRouter } from "../shared/http/cached-router";
import { mountDocs } from "./docs";
import { gitHooksRouter } from "./git-hooks";
import { authRouter } from "./auth";
import { identityRouter } from "./identity";
import { notificationsRouter } from "./notifications";
import { projectsRouter } from "./projects";
import { settingsRouter } from "./settings";
import { deploymentsApiRouter } from "./deployments";
import { logsRouter } from "./logs";
import { runnerJobsRouter, runnerProtocolRouter, runnerStateRouter, serversRouter } from "./servers";
import { healthRouter, PROBE_PATHS } from "./operations/health";
import { auditRouter } from "./operations/audit/route";
import type { LoopProbe } from "./operations/readiness";

export interface AppDeps {
  /** Per-request services: shared ones on Node, built from bindings per request on the Worker. */
  services(c: Context<AppEnv>): RequestServices | Promise<RequestServices>;
  clock?: () => Date;
  logger?: Logger;
  /** Extra routers mounted under /api (the self-hosted-only routes). */
  extraRouters?: Array<OpenAPIHono<AppEnv>>;
  /** The process's background loops GET /readyz checks (self-hosted: the runner's poll, the edge's route feed). */
  loops?: LoopProbe[];
  /** A log line per request (default true: the Worker's go to its log stream); the self-hosted terminal turns them on with LOG_REQUESTS. */
  logRequests?: boolean;
  /**
   * Called once each request is answered, with the time it came in (performance.now()): the self-hosted request
   * metrics (functions/operations/metrics/http-requests.ts). Part of the app's own first step, not a middleware of
   * its own: a layer more in Hono's chain is a few promises more on every request (issue 25).
   */
  onAnswered?: (c: Context<AppEnv>, started: number) => void;
}

const PROBLEM_TYPE = "application/problem+json";

function problemResponse(c: Context<AppEnv>, error: ApiError): Response {
  return c.body(JSON.stringify(error.toProblem(c.get("requestId"))), error.status as 400, { ...error.headers, "content-type": PROBLEM_TYPE });
}

/** Hono's own errors (e.g. a body the runtime cannot read) keep their status as a problem. */
function fromHttpException(e: HTTPException): ApiError {
  if (e.status === 413) return new ApiError("payload_too_large", e.message || "Payload too large");
  if (e.status === 401) return new ApiError("unauthorized", e.message || "Unauthorized");
  if (e.status === 415) return new ApiError("unsupported_media_type", "Send the body as JSON (Content-Type: application/json)");
  if (e.status >= 400 && e.status < 500) return new ApiError("validation", e.message || "Bad request");
  return new ApiError("internal", "Internal error");
}

/**
 * Every answer carries `x-request-id`. Through the self-hosted listener it goes in the Node response's
 * REQUEST_ID_SLOT and joins the head as it is written (functions/self-hosted/request-id-response.ts); through
 * another Node listener (tests, @hono/node-server's own) it is set on the Node response; the Worker's answers
 * take it from `c.header`. Not `c.header` on Node: Hono would build a Headers object for every response and
 * the adapter turn it back into a plain one (~1 µs and 1 KB a request, issue 25).
 */
function stampRequestId(c: Context<AppEnv>, requestId: string): void {
  const outgoing = nodeEnv(c)?.outgoing;
  if (outgoing && REQUEST_ID_SLOT in outgoing) (outgoing as { [REQUEST_ID_SLOT]?: string })[REQUEST_ID_SLOT] = requestId;
  else if (outgoing) outgoing.setHeader("x-request-id", requestId);
  else c.header("x-request-id", requestId);
}

/** The env of an in-process call (`dispatch`): the same bindings, without the outer request's Node response. */
function innerEnv(env: AppEnv["Bindings"] | undefined) {
  return env && typeof env === "object" && "outgoing" in env ? { ...env, outgoing: undefined } : env;
}

export function createApp(deps: AppDeps) {
  const clock = deps.clock ?? (() => new Date());
  const logger = deps.logger ?? jsonLogger();
  // Every route ends up in this app's router (sub-apps' routes are copied in by app.route); shared/http/cached-router.ts says why not SmartRouter.
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook, router: new CachedTrieRouter() });
  const defaultOutbound = createFetchOutbound();
  const defaultGit = { hosts: DEFAULT_GIT_HOSTS, fetch: createGuardedGitFetch() };

  const logRequests = deps.logRequests ?? true;
  const onAnswered = deps.onAnswered;
  const timed = logRequests || onAnswered !== undefined;

  // Not async: on Node (one services object, no release, no request lines) a request passes through without a step of its own.
  app.use("*", (c, next) => {
    const started = timed ? performance.now() : 0;
    const requestId = newId("req");
    c.set("requestId", requestId);
    c.set("clock", clock);
    c.set("logger", logger);
    stampRequestId(c, requestId);
    const provided = deps.services(c);
    return provided instanceof Promise ? provided.then((services) => serve(c, next, services, started)) : serve(c, next, provided, started);
  });

  // The few-routes services of each RequestServices object, resolved once (shared/http/context.ts RouteServices).
  const resolved = new WeakMap<RequestServices, RouteServices>();
  const dispatch = async (c: Context<AppEnv>, request: Request) => app.fetch(request, innerEnv(c.env));
  function routeServices(services: RequestServices): RouteServices {
    let r = resolved.get(services);
    if (!r) {
      r = {
        outbound: services.outbound ?? defaultOutbound,
        mailer: services.mailer,
        wakeDeliveries: services.wakeDeliveries ?? (() => {}),
        wakeRunner: services.wakeRunner ?? (() => {}),
        logFeed: services.logFeed,
        jobFeed: services.jobFeed,
        edgeRoutes: services.edgeRoutes,
        authCache: services.authCache,
        uploads: services.uploads,
        gunzip: services.gunzip,
        git: services.git ?? defaultGit,
        localFolders: services.localFolders,
        cloud: services.cloud,
        dispatch,
      };
      resolved.set(services, r);
    }
    return r;
  }

  function serve(c: Context<AppEnv>, next: Next, services: RequestServices, started: number): Promise<void> {
    c.set("db", services.db);
    c.set("keyring", services.keyring);
    c.set("config", services.config);
    c.set("services", routeServices(services));
    if (services.release || logRequests) return serveAndFinish(c, next, services, started);
    if (!onAnswered) return next();
    // Hono's chain turns a route's error into its answer (onError) before this settles; one reaction, not finally's two.
    const answered = () => onAnswered(c, started);
    return next().then(answered, (e: unknown) => {
      answered();
      throw e;
    });
  }

  async function serveAndFinish(c: Context<AppEnv>, next: Next, services: RequestServices, started: number): Promise<void> {
    try {
      await next();
    } finally {
      if (services.release) await services.release();
      onAnswered?.(c, started);
      // A load balancer polls the probes every second: only their failures are worth a line.
      // Path only: query strings may carry tokens. No headers, no bodies.
      if (logRequests && !(PROBE_PATHS.has(c.req.path) && c.res.status < 500))
        logger.info("request", {
          requestId: c.get("requestId"),
          method: c.req.method,
          path: c.req.path,
          status: c.res.status,
          ms: Math.round(performance.now() - started),
        });
    }
  }

  app.onError((err, c) => {
    if (err instanceof ApiError) return problemResponse(c, err);
    if (err instanceof HTTPException) return problemResponse(c, fromHttpException(err));
    logger.error("unhandled error", { requestId: c.get("requestId"), ...describeError(err) });
    return problemResponse(c, new ApiError("internal", "Unexpected error; quote the requestId when reporting it"));
  });

  app.notFound((c) => problemResponse(c, new ApiError("not_found", `No route for ${c.req.method} ${c.req.path}`)));

  // Mounted one by one: chaining `.route()` would build a typed-client type of every route, which nothing uses and the typecheck pays for.
  const api = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  // The extra routers first: Hono tries routes in registration order, so a static path of theirs (`/projects/local`) must come before `/projects/{id}`.
  const routers: Array<OpenAPIHono<AppEnv>> = [
    ...(deps.extraRouters ?? []),
    identityRouter,
    authRouter,
    settingsRouter,
    projectsRouter,
    deploymentsApiRouter,
    logsRouter,
    notificationsRouter,
    gitHooksRouter,
    serversRouter,
    runnerProtocolRouter,
    runnerJobsRouter,
    runnerStateRouter,
    auditRouter,
  ];
  for (const router of routers) api.route("/", router);
  app.route("/api", api);
  // At the root, where load balancers look for them (functions/operations/health.ts).
  app.route("/", healthRouter({ loops: deps.loops }));

  app.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description:
      "A personal access token (`wsp_…`). Send `X-Organization-Id` to choose the active organization. The runner protocol (`x-permission: runner`) takes a build server's runner token (`wsr_…`) instead, which every other operation refuses (403).",
  });
  serveOpenApiDocument(app, "/api/openapi.json", {
    title: "Workspace Service API",
    version: "0.1.0",
    description:
      "Projects, Settings and Notifications of the workspace service. Errors are `application/problem+json` with `field` and `allowed`. Each operation's `x-permission` names the tag it requires (`authenticated`: any valid token; `public`: no token needed); operations taking a JSON body state its size limit in `x-body-limit` (bytes).",
  });
  mountDocs(app);
  return app;
}
