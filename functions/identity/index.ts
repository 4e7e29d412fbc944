/** The identity resource group: the caller, organizations, members, invitations, tokens. */
import { createRouter } from "../../shared/http/router";
import { invitationsRouter } from "./invitations";
import { meRouter } from "./me";
import { membersRouter } from "./members";
import { orgsRouter } from "./orgs";
import { tokensRouter } from "./tokens";

export const identityRouter = createRouter()
  .route("/", meRouter)
  .route("/", orgsRouter)
  .route("/", membersRouter)
  .route("/", invitationsRouter)
  .route("/", tokensRouter);
