/**
 * Browser sign-in and sessions (the console's cookie): codes by e-mail on every
 * runtime; sign-in by a pasted token on self-hosted instances only (mounted by
 * the Node adapter, functions/self-hosted/services.ts).
 */
import { createRouter } from "../../shared/http/router";
import { loginRouter } from "./login";
import { methodsRouter } from "./methods";
import { sessionsRouter } from "./sessions";
import { tokenSignInRouter } from "./token-sign-in";
import { verifyRouter } from "./verify";

export const authRouter = createRouter().route("/", methodsRouter).route("/", loginRouter).route("/", verifyRouter).route("/", sessionsRouter);

export const selfHostedAuthRouter = tokenSignInRouter;
